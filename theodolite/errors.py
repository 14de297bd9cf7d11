"""Errors theodolite raises on purpose: each names the problem in one line."""


class TheodoliteError(Exception):
    """Base of every error the CLI reports as one clean line."""


class ProfileError(TheodoliteError):
    """A hardware profile is missing, corrupt, foreign, of a newer schema, or inconsistent."""


class NoDeviceError(TheodoliteError):
    """A command needs a GPU and none is visible."""


class FallbackWarning(UserWarning):
    """A theodolite layer ran torch's own kernel instead (an input dtype or device the bundled kernels do not
    run); warned once per reason, the answer is still right."""
