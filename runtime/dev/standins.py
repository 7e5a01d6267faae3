"""Test stand-ins live in ``runtime.platform.standins`` (both harnesses use them); this name
stays for the code that imports them from here."""

from runtime.platform.standins import HttpFn, NotStubbed, ObjectFn, ServiceFn, StandinServices

__all__ = ["HttpFn", "NotStubbed", "ObjectFn", "ServiceFn", "StandinServices"]
