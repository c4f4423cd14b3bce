import signal
import unittest


def sigint_raises(test: unittest.TestCase) -> None:
    """Makes SIGINT raise KeyboardInterrupt until the test ends.

    Python turns SIGINT into KeyboardInterrupt only when SIGINT was not
    ignored as it started, and a script's background job starts with it
    ignored: a test that sends itself SIGINT would wait for an interrupt
    that never comes. Call from the main thread.
    """
    test.addCleanup(signal.signal, signal.SIGINT, signal.signal(signal.SIGINT, signal.default_int_handler))
