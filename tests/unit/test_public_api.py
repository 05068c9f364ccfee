"""The package's public API resolves (lazy re-exports in paddlecd/__init__.py)."""

import paddlecd


def test_every_public_name_resolves():
    for name in paddlecd.__all__:
        assert getattr(paddlecd, name) is not None, name


def test_errors_share_one_root_with_distinct_exit_codes():
    codes = {
        cls.exit_code
        for cls in (
            paddlecd.ConfigError,
            paddlecd.LockError,
            paddlecd.EngineError,
            paddlecd.RegistryError,
            paddlecd.VerifyError,
            paddlecd.PromotionError,
            paddlecd.StorageError,
            paddlecd.ClusterError,
            paddlecd.PipelineError,
        )
    }
    assert len(codes) == 9 and all(
        issubclass(c, paddlecd.PaddlecdError) for c in (paddlecd.RegistryAuthError,)
    )


def test_each_client_library_is_imported_by_its_one_module():
    """STYLE §1: one module per external system — docker only in engine.py, boto3/botocore only in
    s3store.py, kubernetes only in cluster/k8s.py.

    One exception, by design: registry/auth.py reads Docker credentials as the Docker CLI
    does through docker-py's ``docker.auth`` (config.json + credential helpers, no engine client)
    and catches the ``docker.errors`` it raises; it may import those two submodules and nothing
    else of docker, so the engine client stays behind engine.py.
    """
    import re
    from pathlib import Path

    owners = {
        "docker": {"engine.py"},
        "boto3": {"s3.py"},
        "botocore": {"s3.py"},
        "kubernetes": {"k8s.py"},
    }
    narrow = {("registry/auth.py", "docker"): {"docker.auth", "docker.errors",
                                                "docker.credentials"}}
    src = Path(paddlecd.__file__).parent
    for path in [*src.rglob("*.py"), src.parents[1] / "tasks.py"]:
        text = path.read_text()
        rel = path.relative_to(src).as_posix() if path.is_relative_to(src) else path.name
        for lib, allowed in owners.items():
            pattern = rf"^\s*(?:import ({lib}(?:\.\w+)*)|from ({lib}(?:\.\w+)*) import (\w+))"
            found = re.findall(pattern, text, re.M)
            if not found or path.name in allowed:
                continue
            modules = {imp or (f"{frm}.{name}" if frm == lib else frm) for imp, frm, name in found}
            assert (rel, lib) in narrow, f"{path} imports {lib}"
            assert modules <= narrow[(rel, lib)], f"{path} imports {modules - narrow[(rel, lib)]}"
