"""Every way getting a paper in can fail, each with a message a user can act on.

All derive from :class:`IngestError`, so the CLI and the UI catch one type and show its message.
"""


class IngestError(RuntimeError):
    """Getting a paper in failed; nothing was stored."""


class PDFError(IngestError):
    """The file is not a usable PDF (not a PDF, truncated, encrypted, empty, or scanned with no text)."""


class DownloadError(IngestError):
    """A PDF could not be downloaded (network, size limit, not a PDF)."""


class ArxivError(IngestError):
    """arXiv could not answer a request."""


class InvalidArxivId(ArxivError):
    """The text is not an arXiv identifier (new style 2104.12255[v1] or old style hep-th/9901001[v2])."""


class ArxivNotFound(ArxivError):
    """arXiv has no paper with this identifier."""


class ArxivUnavailable(ArxivError):
    """arXiv is unreachable or kept failing after retries (offline, rate limited, or down)."""
