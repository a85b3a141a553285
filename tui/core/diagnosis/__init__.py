"""Diagnosis: a pure function of one replica's recent history -> Finding with evidence."""

from .rules import diagnose
from .thresholds import Thresholds

__all__ = ["diagnose", "Thresholds"]
