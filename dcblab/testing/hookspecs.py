"""The hooks dcblab's pytest plugin calls, for a user's conftest.py or
plugin to implement (declared here so that pytest checks their names and
arguments, as pytest's own hookspecs are)."""

__all__ = ["pytest_dcblab_failure_evidence"]


def pytest_dcblab_failure_evidence(item, labs):
    """Evidence of your own for a failed test that used a lab: return a
    list of (title, text) sections (or None). Each goes into the test's
    report, after dcblab's own, and into report.txt in its artefact
    folder. labs: the LabHandles the test used (``lab.h1.run([...])``
    works here: the guests are still as the test left them)."""
