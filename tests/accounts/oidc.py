"""A real OpenID Connect provider on loopback for the SSO tests (tests/accounts/oidc_provider).

It is node's oidc-provider, installed once per content of its package files under
.local/oidc-provider-<hash>/ (npm ci from the committed lock file, ~3.4 MB, a few seconds; every
later test process, xdist worker and database stage reuses it under a lock).
"""

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCE = Path(__file__).resolve().parent / "oidc_provider"
FILES = ("package.json", "package-lock.json", "provider.mjs")
CLIENT_ID = "evalsite"
CLIENT_SECRET = "loopback-client-secret"
# Where the Django test client's requests come from (its host is "testserver").
TEST_CLIENT_CALLBACK = "http://testserver/accounts/sso/callback/"


def installed() -> Path:
    """The provider's directory with its node_modules, installed by the first caller."""
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes() for name in FILES))
    target = ROOT / ".local" / f"oidc-provider-{digest.hexdigest()[:16]}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / "oidc-provider.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".done").exists():
            work = target.with_name(target.name + ".part")
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            for name in FILES:
                shutil.copy(SOURCE / name, work / name)
            done = subprocess.run(
                ["npm", "ci", "--omit=dev", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                raise RuntimeError(f"npm ci of the OIDC provider failed:\n{done.stderr[-3000:]}")
            (work / ".done").write_text("")
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
    return target


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen
    http: requests.Session = field(default_factory=requests.Session)

    def accounts(self, **claims: dict) -> None:
        """Set accounts' claims (login name -> claims); the next sign-in reads them."""
        self.http.post(f"{self.issuer}/_test/accounts", json=claims, timeout=30).raise_for_status()

    def clock(self, offset: int) -> None:
        """Run the provider's clock `offset` seconds off from now on."""
        self.http.post(
            f"{self.issuer}/_test/clock", json={"offset": offset}, timeout=30
        ).raise_for_status()

    def settings(self) -> dict[str, object]:
        """What an install's environment would give evalsite to use this provider."""
        return {
            "OIDC_ISSUER": self.issuer,
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_RP_SCOPES": "openid email profile groups",
            "OIDC_ADMIN_GROUPS": ["eval-admins"],
            "OIDC_REVIEWER_GROUPS": ["eval-reviewers"],
            "OIDC_VIEWER_GROUPS": ["eval-viewers", "staff"],
        }

    def authorize(self, authorization_url: str, login: str) -> str:
        """Sign `login` in at the provider, as a browser would, starting from the authorization
        URL evalsite redirected to; returns the callback URL the provider sends back to."""
        browser = requests.Session()  # a browser with no session at the provider yet
        url = authorization_url
        for _ in range(10):
            response = browser.get(url, allow_redirects=False, timeout=30)
            if response.status_code == 200 and 'name="login"' in response.text:
                action = response.text.split('action="', 1)[1].split('"', 1)[0]
                response = browser.post(
                    urljoin(url, action),
                    data={"prompt": "login", "login": login, "password": "any"},
                    allow_redirects=False,
                    timeout=30,
                )
            if response.status_code not in (302, 303):
                raise AssertionError(f"{url}: {response.status_code} {response.text[:500]}")
            url = urljoin(url, response.headers["Location"])
            if not url.startswith(self.issuer):
                return url
        raise AssertionError(f"the provider never sent the browser back: {url}")


def callback_query(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


@contextmanager
def running(redirect_uris: list[str]) -> Iterator[Provider]:
    directory = installed()
    options = {"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "redirectUris": redirect_uris}
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            ["node", "provider.mjs", json.dumps(options)],
            cwd=directory,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # blocks until it listens, or it exits
            if not line:
                log.seek(0)
                raise RuntimeError(f"the OIDC provider did not start:\n{log.read()[-3000:]}")
            yield Provider(issuer=json.loads(line)["issuer"], process=process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
