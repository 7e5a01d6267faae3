"""Every error lunaflow raises to a caller.

Messages follow one recipe: what happened (with ids), the rule, the fix. Where the
SPEC fixes a message word for word, the message is the SPEC's.
"""

from __future__ import annotations


class LunaflowError(Exception):
    """Base of every error the platform raises for a refused or failed call."""


class InvalidInput(LunaflowError):
    """A value handed to the platform breaks a rule (run id, duration, payload, option)."""


class NoSuchRun(LunaflowError):
    """A handle names a run that does not exist."""

    def __init__(self, run_id: str, workflow: str | None) -> None:
        self.run_id = run_id
        self.workflow = workflow
        if workflow is None:
            super().__init__(f"no run '{run_id}'")
        else:
            super().__init__(f"no run '{run_id}' of workflow '{workflow}'")


class UnknownWorkflow(LunaflowError):
    def __init__(self, name: str, where: str | None = None) -> None:
        self.name = name
        project = "this project" if where is None else f"the project {where}"
        super().__init__(
            f"no workflow '{name}' is declared in {project}; declare it in one script "
            f'with workflow "{name}" (function(wf, input) ... end), or point at the right project'
        )


class RunIdTaken(LunaflowError):
    """A start named an id already held by a run of another workflow."""

    def __init__(self, run_id: str, held_by: str, wanted: str) -> None:
        self.run_id = run_id
        self.held_by = held_by
        super().__init__(
            f"run id '{run_id}' is held by a run of workflow '{held_by}', so it cannot start "
            f"workflow '{wanted}'; a run id names one run of one workflow — choose another id"
        )


class SignalBacklogFull(InvalidInput):
    """A signal for a run that already holds the most unconsumed signals a run keeps."""

    def __init__(self, run_id: str, limit: int) -> None:
        self.run_id = run_id
        super().__init__(
            f"run '{run_id}' already has {limit} unconsumed signals, the most a run keeps; "
            "its code is not waiting for what is sent — consume them with waits, or send fewer"
        )


class InvalidTransition(LunaflowError):
    """An action that the run's current status does not allow (resume a completed run...)."""


class AlreadyCancelled(InvalidTransition):
    """A cancel of a run that is cancelled already: refused as a transition (SPEC 3: cancel
    applies to every state but completed and cancelled), after it finished the run's cascade,
    which a crash may have cut short. ``below`` and ``changed`` say what that walk found and did."""

    def __init__(self, run_id: str, below: list[str], changed: list[str]) -> None:
        self.run_id = run_id
        self.below = below
        self.changed = changed
        late = [r for r in changed if r != run_id]
        finished = (
            f"cancelled the {len(late)} runs below it still live: {', '.join(late)}"
            if late
            else "every run it started had ended already"
        )
        self.finished = finished
        super().__init__(
            f"run '{run_id}' is cancelled already, so it cannot be cancelled again (cancel applies "
            f"to runs that have not ended); its cascade is finished: {finished}"
        )


class ProjectLoadError(LunaflowError):
    """A project could not be loaded: a script failed to parse or raised, or declared twice."""


class NoProjectFolder(ProjectLoadError):
    """The folder named as the project does not exist: a usage error to the CLI (exit 2)."""


class ServiceUnavailable(LunaflowError):
    """A declared service has no backend in this platform."""


class JournalConflict(LunaflowError):
    """Another writer appended to the run's journal first; the caller must re-read."""

    def __init__(self, run_id: str, seq: int) -> None:
        self.run_id = run_id
        self.seq = seq
        super().__init__(
            f"journal slot {seq} of run '{run_id}' was already written by another worker; "
            "only one writer may append at a position — re-read the journal and replay"
        )


class StoreUnreadable(LunaflowError):
    """A data file exists but SQLite cannot read it (overwritten, truncated, not a database)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(
            f"the data file {path} cannot be read ({reason}); lunaflow keeps its runs in that SQLite "
            "file and reads it only whole — move it away to start with no runs (lunaflow dev makes a "
            "new one), or put back a backup"
        )


class NewerLayout(LunaflowError):
    """A run item names a run layout newer than this code reads (DynamoDB's ``lv``): the
    run is refused, neither read nor written, rather than misread."""

    def __init__(self, run_id: str, needed: int, known: int) -> None:
        self.run_id, self.needed, self.known = run_id, needed, known
        super().__init__(
            f"run '{run_id}' was written by a newer lunaflow: it needs run layout {needed}, and this "
            f"code reads layouts up to {known}, so it neither reads nor writes the run, which stays "
            "as it is; serve it with the lunaflow that wrote it or a later one"
        )


class EngineBug(LunaflowError):
    """An internal invariant failed. Never the user's fault."""

    def __init__(self, what: str) -> None:
        super().__init__(f"lunaflow engine bug: {what}; please report it with the run's journal")
