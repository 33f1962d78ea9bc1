"""Where the rule-evaluator images live, and which regions support Debugger at all.

An image URI is ``{account}.dkr.ecr.{region}.{domain}/{repository}:latest`` with the domain
``amazonaws.com.cn`` in the China partition and ``amazonaws.com`` elsewhere. Two repositories exist:
``sagemaker-debugger-rules`` (every built-in rule and profiler rule) and
``detailed-profiler-processing`` (the job that post-processes detailed profiling, selected by a rule
name starting with ``DetailedProfilerProcessingJobConfig``).

The two tables and the deny-list below are data, taken from SageMaker SDK 2.257.7's published image
configuration. They disagree on purpose: a region outside both the image table and the deny-list
(il-central-1) gets a hook but no built-in rules.
"""

from __future__ import annotations

from sdk_ext.debugger.errors import DebuggerConfigError

DEBUGGER_RULES_REPOSITORY = "sagemaker-debugger-rules"
DETAILED_PROFILER_REPOSITORY = "detailed-profiler-processing"
DETAILED_PROFILER_RULE_PREFIX = "DetailedProfilerProcessingJobConfig"

# region -> ECR account publishing the image
_REGISTRIES: dict[str, dict[str, str]] = {
    DEBUGGER_RULES_REPOSITORY: {
        "af-south-1": "314341159256",
        "ap-east-1": "199566480951",
        "ap-northeast-1": "430734990657",
        "ap-northeast-2": "578805364391",
        "ap-northeast-3": "479947661362",
        "ap-south-1": "904829902805",
        "ap-southeast-1": "972752614525",
        "ap-southeast-2": "184798709955",
        "ca-central-1": "519511493484",
        "cn-north-1": "618459771430",
        "cn-northwest-1": "658757709296",
        "eu-central-1": "482524230118",
        "eu-north-1": "314864569078",
        "eu-south-1": "563282790590",
        "eu-west-1": "929884845733",
        "eu-west-2": "250201462417",
        "eu-west-3": "447278800020",
        "me-south-1": "986000313247",
        "sa-east-1": "818342061345",
        "us-east-1": "503895931360",
        "us-east-2": "915447279597",
        "us-gov-west-1": "515509971035",
        "us-west-1": "685455198987",
        "us-west-2": "895741380848",
    },
    DETAILED_PROFILER_REPOSITORY: {
        "eu-central-1": "482524230118",
        "eu-west-1": "929884845733",
        "il-central-1": "216881608335",
        "us-east-1": "503895931360",
        "us-east-2": "915447279597",
        "us-west-2": "895741380848",
    },
}

# Regions where SageMaker Debugger (hook and profiler) is not offered. The same list for both.
DEBUGGER_UNSUPPORTED_REGIONS = frozenset({
    "us-iso-east-1", "us-isob-east-1", "ap-southeast-3", "ap-southeast-4", "eu-south-2",
    "me-central-1", "ap-south-2", "eu-central-2", "us-gov-east-1",
})
PROFILER_UNSUPPORTED_REGIONS = DEBUGGER_UNSUPPORTED_REGIONS


def region_supports_debugger(region: str) -> bool:
    return region.lower() not in DEBUGGER_UNSUPPORTED_REGIONS


def region_supports_profiler(region: str) -> bool:
    return region.lower() not in PROFILER_UNSUPPORTED_REGIONS


def instance_type_disables_profiler(instance_type: object) -> bool:
    """Trainium instances (``ml.trn*``) run without the profiler."""
    return isinstance(instance_type, str) and instance_type.startswith("ml.trn")


def _ecr_domain(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def repository_for_rule(name: str | None) -> str:
    if name is not None and name.startswith(DETAILED_PROFILER_RULE_PREFIX):
        return DETAILED_PROFILER_REPOSITORY
    return DEBUGGER_RULES_REPOSITORY


def supported_regions(repository: str) -> list[str]:
    return sorted(_REGISTRIES[repository])


def image_uri_problem(name: str | None, region: str) -> str | None:
    """The reason no image exists for this rule in this region, or None if one does."""
    repository = repository_for_rule(name)
    if region in _REGISTRIES[repository]:
        return None
    return (
        f"Unsupported region: {region}. No {repository} rule-evaluator image is published in region {region!r} "
        f"(needed by rule {name!r}). Supported region(s): {', '.join(supported_regions(repository))}. Run the "
        "job in one of them, or give the rule your own image with Rule.custom/ProfilerRule.custom"
    )


def get_rule_container_image_uri(name: str | None, region: str) -> str:
    """The rule-evaluator image for a rule of this name in this region.

    Raises:
        DebuggerConfigError: no image is published in ``region`` for this rule.
    """
    problem = image_uri_problem(name, region)
    if problem is not None:
        raise DebuggerConfigError([problem], where="rule image")
    repository = repository_for_rule(name)
    account = _REGISTRIES[repository][region]
    return f"{account}.dkr.ecr.{region}.{_ecr_domain(region)}/{repository}:latest"
