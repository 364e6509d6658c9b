"""Exports of stored results to other systems, the I/O edges beside the pure renderers of
:mod:`perfgate.reporters`: :mod:`.prometheus` pushes the latest values to a Pushgateway (their
exposition text is built in :mod:`perfgate.reporters.prometheus`), :mod:`.tensorboard` builds
TensorBoard event files (named after this host). :mod:`perfgate.app.export` reads the store and
calls them; nothing below ``app`` imports this package.
"""
