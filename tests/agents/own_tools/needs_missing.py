"""A tools module that needs a package this machine does not have."""

import package_that_is_not_installed  # noqa: F401
