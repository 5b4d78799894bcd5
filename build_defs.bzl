"""Build macros: every dreplay library, binary and test gets the same options.

Use these instead of the native cc_* rules:

    load("//:build_defs.bzl", "dreplay_cc_library", "dreplay_cc_test")

Environment code that must match reference floating point results bit for bit
passes `strict_fp = True`, which turns off fused multiply-add contraction.
"""

DREPLAY_COPTS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
    "-Wno-missing-field-initializers",
]

_STRICT_FP_COPTS = ["-ffp-contract=off"]

def _copts(copts, strict_fp):
    return DREPLAY_COPTS + (_STRICT_FP_COPTS if strict_fp else []) + copts

def dreplay_cc_library(name, copts = [], strict_fp = False, **kwargs):
    native.cc_library(
        name = name,
        copts = _copts(copts, strict_fp),
        **kwargs
    )

def dreplay_cc_binary(name, copts = [], strict_fp = False, **kwargs):
    native.cc_binary(
        name = name,
        copts = _copts(copts, strict_fp),
        **kwargs
    )

def dreplay_cc_test(name, copts = [], deps = [], strict_fp = False, size = "small", **kwargs):
    """A GoogleTest test. Links gtest_main unless the test brings its own main.

    Tests link statically, as the binaries do. Linked dynamically, each
    library's shared object would be linked without the system libraries'
    link options, so its references to libibverbs would carry no symbol
    version and bind to the IBVERBS_1.0 compatibility verbs, whose contexts
    crash the current ones (ibv_query_gid_ex): the tests would not run the
    code the binaries run.
    """
    native.cc_test(
        name = name,
        copts = _copts(copts, strict_fp),
        size = size,
        linkstatic = kwargs.pop("linkstatic", True),
        deps = deps + ["@system//:gtest_main"],
        **kwargs
    )

def dreplay_soft_transports_test(name, **kwargs):
    """A dreplay_cc_test `NAME_test`, and its twin `NAME_tcp_test`.

    The twin runs with DREPLAY_TEST_SOFT_TRANSPORT=tcp
    (verbs/soft/test_util.h): in one process the soft provider shares
    memory with its peer, and the twin keeps every queue pair on the TCP
    path, as between hosts.
    """
    if not name.endswith("_test"):
        fail("dreplay_soft_transports_test: %s does not end in _test" % name)
    dreplay_cc_test(name = name, **kwargs)
    dreplay_cc_test(
        name = name[:-len("_test")] + "_tcp_test",
        env = {"DREPLAY_TEST_SOFT_TRANSPORT": "tcp"},
        **kwargs
    )
