"""The telemetry journal: what happened to every event, hash-chained, on disk.

:mod:`vehicle_middleware.contract.journal` has its format (record kinds and their fields,
levels, batch records, offsets and the hash chain, segment names); here:

- writing: :mod:`writer` (the bounded buffer, the writer thread, batched
  writes, losses), :mod:`rotation` (the segment being written and the next),
  :mod:`retention` (which segments go, and the records that say so),
  :mod:`directory_lock` (one live process per directory), :mod:`reserve`
  (the reserve file and the loss marker), :mod:`taps` (where the ESS and the
  V-Store meet the journal);
- reading back: :mod:`reader` (reading segments, skipping torn lines, and
  verifying chains);
- consumers: :mod:`feed` (their async API), :mod:`follow` (one Follow
  stream), :mod:`history`, :mod:`archive`, :mod:`consumers`, :mod:`answers`,
  :mod:`pinning`.

Owns writing the journal, retention, verification and its consumers (history,
pinning, Poll/Follow).
Imports the cores' types; must not import the servicers or the analysis.
"""

from vehicle_middleware.contract.journal.chain import Chain, OffsetCounter, record_hash
from vehicle_middleware.contract.journal.records import KINDS, Kind, Level
from vehicle_middleware.server.journal.reader import JournalReport, read_journal, verify
from vehicle_middleware.server.journal.writer import Journal, JournalInUseError

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
