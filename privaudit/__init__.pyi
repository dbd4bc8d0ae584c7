# The package's lazily loaded names, for type checkers (privaudit/__init__.py loads them on first use).
from privaudit import errors as errors
from privaudit.api.attack import AttackResults as AttackResults
from privaudit.api.attack import attack as attack
from privaudit.api.audit import AuditReport as AuditReport
from privaudit.api.audit import audit as audit
from privaudit.api.audit_model import ModelAudit as ModelAudit
from privaudit.api.audit_model import audit_model as audit_model
from privaudit.api.epsilon import EpsilonResult as EpsilonResult
from privaudit.api.epsilon import epsilon as epsilon
from privaudit.api.export_logits import ExportedLogits as ExportedLogits
from privaudit.api.export_logits import export_logits as export_logits
from privaudit.api.recipe import Recipe as Recipe
from privaudit.api.report import WorkspaceReport as WorkspaceReport
from privaudit.api.report import report as report
from privaudit.api.reproduce import Reproduction as Reproduction
from privaudit.api.reproduce import reproduce as reproduce
from privaudit.api.scan import ScanReport as ScanReport
from privaudit.api.scan import scan as scan
from privaudit.api.theory import TheoryResult as TheoryResult
from privaudit.api.theory import theory as theory
from privaudit.api.train import TrainedModels as TrainedModels
from privaudit.api.train import train as train

__version__: str
__all__: list[str]
