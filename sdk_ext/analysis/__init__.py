"""smdebug's ``smdebug.analysis`` module path: ``from sdk_ext.analysis.utils import no_refresh, refresh``."""
