"""The CDK app (app.py), the AutoStop construct (constructs/) and the stack using it (stacks/).

Run as a package from the repository root (``python3 -m infra.app``, what cdk.json does): infra/ itself
must never be on sys.path, or infra/constructs would shadow the ``constructs`` library.
"""
