"""Stores: where runs, journals, signals, timers and secrets live.

``base.Store`` states the contract; ``sqlite.SQLiteStore`` implements it on one SQLite file.
"""

from runtime.store.base import RunRecord, RunUpdate, Store, TimerSet
from runtime.store.sqlite import SQLiteStore

__all__ = ["RunRecord", "RunUpdate", "SQLiteStore", "Store", "TimerSet"]
