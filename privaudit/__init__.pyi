# The package's lazily loaded names, for type checkers (privaudit/__init__.py loads them on first use).
from privaudit import errors as errors
from privaudit.api.attack import AttackResults as AttackResults, attack as attack
from privaudit.api.audit import AuditReport as AuditReport, audit as audit
from privaudit.api.audit_model import ModelAudit as ModelAudit, audit_model as audit_model
from privaudit.api.epsilon import EpsilonResult as EpsilonResult, epsilon as epsilon
from privaudit.api.export_logits import ExportedLogits as ExportedLogits, export_logits as export_logits
from privaudit.api.report import WorkspaceReport as WorkspaceReport, report as report
from privaudit.api.reproduce import Reproduction as Reproduction, reproduce as reproduce
from privaudit.api.scan import ScanReport as ScanReport, scan as scan
from privaudit.api.theory import TheoryResult as TheoryResult, theory as theory
from privaudit.api.recipe import Recipe as Recipe
from privaudit.api.train import TrainedModels as TrainedModels, train as train

__version__: str
__all__: list[str]
