"""Offline verification of a release directory.

entry: verify_release and its report; trust: which key is trusted; checker: the state of one run
and how files are read; files: file-level checks; records: record-level checks. Imports point
down that list, never back up."""
from releases.errors import Failure
from releases.verify.entry import VerificationReport, verify_release

__all__ = ["VerificationReport", "verify_release", "Failure"]
