"""Linear-time scanning of model text, shared by every parser: where markers stand
(`markers`), where balanced JSON values end (`json_spans`, by the C decoders in `decode` and
the bracket scanner in `brackets`), the spans frames have taken (`spans`), all on one budget
per document (`budget`), and the `Document` that puts them together."""

from .budget import Budget
from .document import Document, space_before
from .markers import MarkerIndex, markers_present
from .spans import Spans

__all__ = ["Budget", "Document", "MarkerIndex", "Spans", "markers_present", "space_before"]
