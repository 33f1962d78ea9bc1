"""The one packaging fact pyproject.toml cannot state: lambda/ ships inside the wheel.

lambda/ is the auto-stop function's Lambda asset (infra/ deploys exactly its two files) and stays the only
copy of that code: the wheel installs the same files as sdk_ext/lambda_function/, where
sdk_ext.local.jobs.deployment finds them when no checkout is around. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["sdk_ext", "sdk_ext.*"]), "sdk_ext.lambda_function"],
    package_dir={"sdk_ext.lambda_function": "lambda"},
)
