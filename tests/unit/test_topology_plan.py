"""docker-compose.yml and its rehearsal (tests/topology.py, run by
tests/acceptance/test_topology.py) stay in step: every compose service is either started by
the rehearsal or one of the stand-ins, so a service added to compose without being rehearsed
fails here. Parses files only; starts nothing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests import topology
from tests.topology import REHEARSED, STAND_INS, Rehearsal


@pytest.fixture(scope="module")
def plan() -> Iterator[Rehearsal]:
    r = Rehearsal()
    r.pg_port, r.redis_port, r.redis_password = 15432, 16379, "pw"  # as if the stand-ins ran
    yield r
    shutil.rmtree(r.dir, ignore_errors=True)


def test_every_compose_service_is_rehearsed_or_a_stand_in() -> None:
    services = set(topology.load_compose()["services"])
    assert not set(REHEARSED) & set(STAND_INS)
    missing = services - set(REHEARSED) - set(STAND_INS)
    assert not missing, f"compose services the rehearsal does not start: {missing} (tests/topology.py REHEARSED)"
    gone = (set(REHEARSED) | set(STAND_INS)) - services
    assert not gone, f"rehearsed services no longer in compose: {gone}"


def test_stand_ins_are_the_services_with_their_own_image(plan: Rehearsal) -> None:
    for name, svc in plan.services.items():
        app = svc.get("build", {}).get("dockerfile") == "ops/Dockerfile"
        assert app == (name in REHEARSED), name


def test_start_order_follows_depends_on(plan: Rehearsal) -> None:
    order = topology.start_order(plan.services)
    assert order[:2] == ["postgres", "redis"]
    for name in order:
        for dep in topology.depends_on(plan.services[name]):
            assert order.index(dep) < order.index(name), (name, dep)
    assert order.index("migrate") < min(order.index(s) for s in ("api", "worker", "webhooks", "beat"))


def test_interpolation_follows_compose() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert topology.interpolate("${SET:-d} ${EMPTY:-d} ${MISSING:-d} ${EMPTY-d} ${MISSING-d}", env) == "x d d  d"
    with pytest.raises(KeyError, match="EMPTY"):
        topology.interpolate("${EMPTY:?set it}", env)
    assert topology.interpolate("${EMPTY?set it}", env) == ""


def test_every_app_service_runs_an_installed_command_against_the_stand_ins(plan: Rehearsal) -> None:
    for name in REHEARSED:
        argv = plan.argv(name)
        assert shutil.which(argv[0], path=plan.env(name)["PATH"]), f"{name}: {argv[0]} is not installed"
        env = plan.env(name)
        for key in ("MEMWORKER_DATABASE_URL", "MEMWORKER_REDIS_URL"):
            url = urlsplit(env[key])
            assert url.hostname == "127.0.0.1" and url.port in (15432, 16379), (name, key)
        assert env["HF_HUB_OFFLINE"] == "1"  # from the image and from compose
        # every container path is mapped to a folder here: no tmpfs, volume or image path left
        for value in [*env.values(), *argv]:
            assert not value.startswith(("/run/", "/var/lib/", "/opt/", "/app")), (name, value)
        for cpath, path in plan.paths(name).items():
            assert Path(path).is_absolute(), (name, cpath)


def test_published_ports_are_mapped_and_listen_on_loopback(plan: Rehearsal) -> None:
    for name, ports in plan.ports.items():
        argv = " ".join(plan.argv(name))
        assert "0.0.0.0" not in argv
        for cport, hport in ports.items():
            assert str(hport) in argv and str(cport) not in argv.split(), (name, cport)


def test_the_healthchecks_the_conditions_wait_on_are_runnable(plan: Rehearsal) -> None:
    for name, svc in plan.services.items():
        for dep, condition in topology.depends_on(svc).items():
            if condition == "service_healthy":
                argv = plan.healthcheck(dep)
                assert argv, f"{name} waits for {dep} to be healthy, which has no healthcheck"
                assert shutil.which(argv[0], path=plan.healthcheck_env(dep)["PATH"]) or Path(argv[0]).is_file()
    api = plan.healthcheck("api")
    assert api and str(plan.ports["api"][8420]) in " ".join(api)


def test_the_image_environment_and_build_checks_are_read_from_the_dockerfile() -> None:
    env = topology.image_env()
    assert env["HF_HUB_OFFLINE"] == "1"
    # every path the image's ENV names is one the rehearsal maps (a new one must be added)
    for key, value in env.items():
        if value.startswith("/"):
            assert value in topology.IMAGE_BUILT or value in topology.IMAGE_PATHS, (key, value)
    checks = topology.build_checks()
    assert checks and all(c.startswith("python -c") for c in checks)
