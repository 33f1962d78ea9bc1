"""Running one CreateTrainingJob request as a local job: its /opt/ml-shaped directory, its processes (training, rule
evaluators), its DescribeTrainingJob-shaped state, its state-change events, and the SageMaker client over it.

May import: sdk_ext.exceptions, sdk_ext.format, sdk_ext.hooks (preflight checks), sdk_ext.profiler (finishing the
profiler output), sdk_ext.local.request. Never the CLI or the report.
"""
