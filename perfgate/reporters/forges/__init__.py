"""The forges perfgate posts to, one registry entry each: how a CI job on it is detected,
where its API is, how the repository, change request number and commit are read from the
job's variables, which variables hold the token, the longest comment it accepts, what a
change request is called, and the poster that talks to its API.

Adding a forge is one module (its poster, ``detect``, ``read_number``, ``read_sha``,
``connect``) and one entry in :data:`FORGES` (GitHub, GitLab, GitCode today). Nothing else
names a forge: a name that is not here is a :class:`~perfgate.errors.UsageError`, never a
fallback to some other forge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from perfgate.errors import DeliverySetupError, UsageError
from perfgate.reporters.forges import gitcode, github, gitlab
from perfgate.reporters.forges.api import Poster, RetryPolicy

Reporter = Poster
"""What every forge's poster offers (:mod:`.github`, :mod:`.gitlab`, :mod:`.gitcode`)."""


class Connect(Protocol):
    """Builds a forge's poster for one repository from a token and the variable it came from."""

    def __call__(
        self, api_url: str, repo: str, token: str, *, variable: str, policy: RetryPolicy
    ) -> Reporter: ...


@dataclass(frozen=True)
class Token:
    """A credential from the environment and the variable that held it."""

    variable: str
    value: str


@dataclass(frozen=True)
class Forge:
    """One forge: everything perfgate needs to find a CI job's change request and post to it.

    ``change`` and ``reference`` are its words for a change request and for pointing at
    one: ``PR`` and ``#`` give ``PR #7``. ``token_variables`` are tried in order; the
    first one set is used. ``token_hint`` says what to set when none is.
    ``server_url_variable`` names the forge's web server (links in a fork's report may point
    there); ``statuses`` says whether it has commit statuses at all.
    """

    name: str
    ci: str
    detect: Callable[[Mapping[str, str]], bool]
    default_api_url: str
    api_url_variable: str
    repo_variable: str
    read_number: Callable[[Mapping[str, str]], int | None]
    read_sha: Callable[[Mapping[str, str]], str]
    token_variables: tuple[str, ...]
    token_hint: str
    max_chars: int
    change: str
    reference: str
    connect: Connect
    server_url_variable: str = ""
    statuses: bool = True

    def api_url(self, env: Mapping[str, str]) -> str:
        """The API root the job's variables name, else the public one."""
        return env.get(self.api_url_variable) or self.default_api_url

    def repo(self, env: Mapping[str, str]) -> str:
        """The repository (or project) the job's variables name; empty if none."""
        return env.get(self.repo_variable, "")

    def token(self, env: Mapping[str, str]) -> Token:
        """The first token set among :attr:`token_variables`; DeliverySetupError if none is."""
        for variable in self.token_variables:
            value = env.get(variable, "")
            if value:
                return Token(variable, value)
        raise DeliverySetupError(f"{self.name}: no token: set {self.token_hint}")

    def change_ref(self, number: int) -> str:
        """How people write change request ``number`` here: ``PR #7``, ``MR !3``."""
        return f"{self.change} {self.reference}{number}"

    def poster(
        self, api_url: str, repo: str, env: Mapping[str, str], policy: RetryPolicy
    ) -> Reporter:
        """A poster for ``repo`` at ``api_url`` with the token from ``env``."""
        token = self.token(env)
        return self.connect(api_url, repo, token.value, variable=token.variable, policy=policy)


FORGES: tuple[Forge, ...] = (
    Forge(
        name="github",
        ci="GitHub Actions",
        detect=github.detect,
        default_api_url=github.DEFAULT_API_URL,
        api_url_variable="GITHUB_API_URL",
        repo_variable="GITHUB_REPOSITORY",
        read_number=github.read_number,
        read_sha=github.read_sha,
        token_variables=("GITHUB_TOKEN",),
        token_hint="GITHUB_TOKEN",
        max_chars=github.MAX_CHARS,
        change="PR",
        reference="#",
        connect=github.connect,
        server_url_variable="GITHUB_SERVER_URL",
    ),
    Forge(
        name="gitlab",
        ci="GitLab CI",
        detect=gitlab.detect,
        default_api_url=gitlab.DEFAULT_API_URL,
        api_url_variable="CI_API_V4_URL",
        repo_variable="CI_PROJECT_ID",
        read_number=gitlab.read_number,
        read_sha=gitlab.read_sha,
        token_variables=("GITLAB_TOKEN", gitlab.JOB_TOKEN_VARIABLE),
        token_hint=f"GITLAB_TOKEN (api scope) or {gitlab.JOB_TOKEN_VARIABLE}",
        max_chars=gitlab.MAX_CHARS,
        change="MR",
        reference="!",
        connect=gitlab.connect,
        server_url_variable="CI_SERVER_URL",
    ),
    Forge(
        name="gitcode",
        ci="a GitCode pipeline",
        detect=gitcode.detect,
        default_api_url=gitcode.DEFAULT_API_URL,
        api_url_variable=gitcode.API_URL_VARIABLE,
        repo_variable=gitcode.REPO_VARIABLE,
        read_number=gitcode.read_number,
        read_sha=gitcode.read_sha,
        token_variables=gitcode.TOKEN_VARIABLES,
        token_hint=" or ".join(gitcode.TOKEN_VARIABLES),
        max_chars=gitcode.MAX_CHARS,
        change="PR",
        reference="!",
        connect=gitcode.connect,
        server_url_variable=gitcode.SERVER_URL_VARIABLE,
        statuses=False,
    ),
)
"""Every forge, in the order :func:`detect_forge` tries them."""

MAX_CHARS_ANY = min(forge.max_chars for forge in FORGES)
"""The longest comment every forge accepts: the limit when the forge is not known yet."""


def forge_names() -> tuple[str, ...]:
    """The names ``--forge`` accepts."""
    return tuple(forge.name for forge in FORGES)


def forge_named(name: str) -> Forge:
    """The forge called ``name``; UsageError for a name that is not in the registry."""
    for forge in FORGES:
        if forge.name == name:
            return forge
    known = " or ".join(forge_names())
    raise UsageError(f"unknown forge {name!r}: expected {known}")


def detect_forge(env: Mapping[str, str]) -> Forge | None:
    """The forge whose CI this job runs in, from its variables; None outside any."""
    return next((forge for forge in FORGES if forge.detect(env)), None)
