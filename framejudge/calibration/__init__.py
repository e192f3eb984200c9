"""Judge-vs-human and human-vs-human agreement, with intervals."""

from .cohen import cohen_kappa
from .krippendorff_alpha import krippendorff_alpha
from .multirater import fleiss_kappa, gwet_ac1, pabak, percent_agreement
from .ratings import Ratings
from .result import Coefficient

__all__ = ["Coefficient", "Ratings", "cohen_kappa", "fleiss_kappa", "gwet_ac1", "krippendorff_alpha", "pabak",
           "percent_agreement"]
