"""The scrape log: JSON lines, one object per scrape (writer.py documents the format)."""

from .reader import LogFormatError, LogProblem, load_log, read_log, record_to_scrape
from .render import DIALECTS, render_sample
from .writer import Recorder, scrape_record

__all__ = [
    "DIALECTS",
    "LogFormatError",
    "LogProblem",
    "Recorder",
    "load_log",
    "read_log",
    "record_to_scrape",
    "render_sample",
    "scrape_record",
]
