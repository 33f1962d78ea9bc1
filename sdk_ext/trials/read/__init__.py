"""The value-reading path of a trial: from (tensor, steps) to numpy arrays with the fewest requests and copies.

Layers, top down: ``reader`` (what Tensor calls: one value, a batch, many steps; the value cache and read-ahead) ->
``many_steps`` (one tensor over many steps, a layout at a time) and ``step_plan`` (where a tensor's records lie over
many steps) -> ``event_files`` (fetching and decoding records from event files) -> ``file_cache`` (whole files in
memory) and ``byte_ranges`` (just the records' bytes, for trials larger than the cache).

May import: sdk_ext.format, sdk_ext.storage, sdk_ext.trials.index, sdk_ext.trials.options. Never trial/tensor.
"""
