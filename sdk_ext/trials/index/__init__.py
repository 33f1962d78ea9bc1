"""What a trial knows about its steps: index files parsed into step files (``step_files``), cached and refreshed
incrementally (``trial_index``), and served from the writers' consolidated indexes where they exist (``consolidated``).

May import: sdk_ext.format, sdk_ext.storage, sdk_ext.exceptions, sdk_ext.modes. Never the read path or trial/tensor.
"""
