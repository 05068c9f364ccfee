"""The package's public API resolves (lazy re-exports in paddlecd/__init__.py)."""

import paddlecd


def test_every_public_name_resolves():
    for name in paddlecd.__all__:
        assert getattr(paddlecd, name) is not None, name


def test_errors_share_one_root_with_distinct_exit_codes():
    codes = {cls.exit_code for cls in (paddlecd.ConfigError, paddlecd.LockError, paddlecd.EngineError,
                                       paddlecd.RegistryError, paddlecd.VerifyError, paddlecd.PromotionError,
                                       paddlecd.StorageError, paddlecd.ClusterError, paddlecd.PipelineError)}
    assert len(codes) == 9 and all(issubclass(c, paddlecd.PaddlecdError) for c in (paddlecd.RegistryAuthError,))
