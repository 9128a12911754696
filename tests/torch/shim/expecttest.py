"""expecttest.py - the two names torch.testing._internal.common_utils takes from the expecttest
package (ACCEPT, TestCase), which Debian 12 does not package. Used by test_harness.py only when
the real package is missing; no test here calls expecttest's own assertions."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (expecttest's name)
        self.assertEqual(actual, expect)
