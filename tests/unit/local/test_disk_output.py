"""A full disk a job's program reports on its output is a full disk for the runner (sdk_ext.local.jobs.disk).

A writer that fails cleans up its temporary files, so by the time the runner looks at free space the step that
did not fit may have left room again: what the program printed is then the only sign.
"""

import errno

from sdk_ext.local.jobs.disk import full_in_output


def test_the_hooks_message_and_a_scripts_oserror_are_read_with_their_path() -> None:
    hook = ("ERROR:sdk_ext.hooks.step_lifecycle:sdk_ext hook failed in save_tensor (writing "
            "/jobs/j/output/tensors/events/000000000013/x.tfevents.1-2-3.tmp: No space left on device); the hook is "
            "disabled")
    found = full_in_output(hook)
    assert found is not None and found.errno == errno.ENOSPC
    assert found.filename == "/jobs/j/output/tensors/events/000000000013/x.tfevents.1-2-3.tmp"
    script = "OSError: [Errno 28] No space left on device: '/jobs/j/model/model.pt'"
    found = full_in_output(script)
    assert found is not None and found.filename == "/jobs/j/model/model.pt"
    quota = full_in_output("torch.save failed: Disk quota exceeded")
    assert quota is not None and quota.errno == errno.EDQUOT and quota.filename is None


def test_other_lines_are_not_a_full_disk() -> None:
    for line in ("step 25", "loss 0.3", "free space: plenty", "ERROR: No such file or directory: '/x'"):
        assert full_in_output(line) is None
