"""The telemetry journal: what happened to every event, hash-chained, on disk.

:mod:`vmw.contract.journal` has its format (record kinds and their fields,
levels, batch records, offsets and the hash chain); here: :mod:`segments` (segment
names, reading their lines), :mod:`writer` (the bounded buffer, the writer
thread, batched writes, losses, retention), :mod:`reserve` (the reserve file,
the loss marker and the directory lock's names), :mod:`taps` (where the ESS and
the V-Store meet the journal), :mod:`reader` (reading segments back, skipping
torn lines, and verifying chains).

Owns writing the journal, retention, verification and its consumers (history,
pinning, Poll/Follow).
Imports the cores' types; must not import the servicers or the analysis.
"""

from vmw.contract.journal.chain import Chain, OffsetCounter, record_hash
from vmw.contract.journal.records import KINDS, Kind, Level
from vmw.server.journal.reader import JournalReport, read_journal, verify
from vmw.server.journal.writer import Journal, JournalInUseError

__all__ = [
    "KINDS",
    "Chain",
    "Journal",
    "JournalInUseError",
    "JournalReport",
    "Kind",
    "Level",
    "OffsetCounter",
    "read_journal",
    "record_hash",
    "verify",
]
