"""`ResourceLoader`: context files, system prompt overrides, skills and prompt templates.

Discovery follows pi: AGENTS.md (or CLAUDE.md) from the agent dir, then from the filesystem
root down to cwd; SYSTEM.md / APPEND_SYSTEM.md from the project dir, else the agent dir; skills
from `SKILL.md` directories; prompt templates from `prompts/*.md`. A broken skill is reported in
`diagnostics` and never stops the agent from starting.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from clawpi.sdk.paths import PROJECT_DIR_NAMES

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
_SKILL_FILE = "SKILL.md"
_MAX_SKILL_NAME = 64
_MAX_SKILL_DESCRIPTION = 1024
_SKILL_NAME = re.compile(r"^[a-z0-9-]+$")
_SKIPPED_DIRS = {"node_modules"}


@dataclasses.dataclass(frozen=True, slots=True)
class ContextFile:
    path: Path
    content: str


@dataclasses.dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    file_path: Path
    base_dir: Path
    source: str
    disable_model_invocation: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class PromptTemplate:
    name: str
    description: str
    content: str
    file_path: Path


@dataclasses.dataclass(frozen=True, slots=True)
class Diagnostic:
    level: Literal["warning", "error"]
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.path}: {self.message}"


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """(YAML front matter, body). Malformed front matter raises ValueError with the reason."""
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            raw = "\n".join(lines[1:index])
            import yaml  # only files with front matter need it (~20 ms at start-up otherwise)

            try:
                data = yaml.safe_load(raw) or {}
            except yaml.YAMLError as exc:
                raise ValueError(f"invalid front matter: {exc}") from exc
            if not isinstance(data, dict):
                raise ValueError("front matter must be a mapping")
            return data, "\n".join(lines[index + 1 :])
    return {}, text


class ResourceLoader:
    """Loads everything a session's system prompt and commands are built from."""

    def __init__(
        self,
        cwd: Path | str,
        agent_dir: Path | str | None = None,
        *,
        extra_skill_paths: Sequence[Path | str] = (),
        extra_prompt_paths: Sequence[Path | str] = (),
        system_prompt: str | None = None,
        append_system_prompt: str | None = None,
        load_context_files: bool = True,
    ) -> None:
        self.cwd = Path(cwd).resolve()
        self.agent_dir = Path(agent_dir) if agent_dir is not None else None
        self._extra_skills = [Path(p) for p in extra_skill_paths]
        self._extra_prompts = [Path(p) for p in extra_prompt_paths]
        self._system_prompt_arg = system_prompt
        self._append_arg = append_system_prompt
        self._load_context = load_context_files
        self.diagnostics: list[Diagnostic] = []
        self.context_files: list[ContextFile] = []
        self.skills: list[Skill] = []
        self.prompt_templates: list[PromptTemplate] = []
        self.system_prompt: str | None = None
        self.append_system_prompt: str | None = None
        self.reload()

    def reload(self) -> None:
        self.diagnostics = []
        self.context_files = self._find_context_files() if self._load_context else []
        self.system_prompt = self._text_option(self._system_prompt_arg, "SYSTEM.md")
        self.append_system_prompt = self._text_option(self._append_arg, "APPEND_SYSTEM.md")
        self.skills = self._load_skills()
        self.prompt_templates = self._load_prompts()

    # -- context files and prompt overrides ------------------------------------------------

    def _find_context_files(self) -> list[ContextFile]:
        directories: list[Path] = []
        if self.agent_dir is not None:
            directories.append(self.agent_dir)
        directories.extend(reversed([self.cwd, *self.cwd.parents]))
        seen: set[Path] = set()
        found: list[ContextFile] = []
        for directory in directories:
            for name in CONTEXT_FILE_NAMES:
                path = directory / name
                if path.is_file():
                    real = path.resolve()
                    if real not in seen:
                        seen.add(real)
                        content = self._read(path)
                        if content is not None:
                            found.append(ContextFile(path, content))
                    break
        return found

    def _text_option(self, value: str | None, file_name: str) -> str | None:
        """A CLI value (a path if it exists, else literal text), else the project/agent file."""
        if value is not None:
            candidate = Path(value).expanduser()
            if len(value) < 4096 and "\n" not in value and candidate.is_file():
                return self._read(candidate)
            return value
        for directory in self._project_dirs():
            path = directory / file_name
            if path.is_file():
                return self._read(path)
        if self.agent_dir is not None and (self.agent_dir / file_name).is_file():
            return self._read(self.agent_dir / file_name)
        return None

    def _project_dirs(self) -> list[Path]:
        return [self.cwd / name for name in PROJECT_DIR_NAMES if (self.cwd / name).is_dir()]

    def _read(self, path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.diagnostics.append(Diagnostic("warning", path, f"cannot read: {exc}"))
            return None

    # -- skills ----------------------------------------------------------------------------

    def _skill_roots(self) -> list[tuple[Path, str]]:
        roots: list[tuple[Path, str]] = []
        if self.agent_dir is not None:
            roots.append((self.agent_dir / "skills", "user"))
        roots.append((Path.home() / ".agents" / "skills", "user"))
        roots.extend((d / "skills", "project") for d in self._project_dirs())
        for directory in [self.cwd, *self.cwd.parents]:
            roots.append((directory / ".agents" / "skills", "project"))
            if (directory / ".git").exists():
                break
        roots.extend((path, "path") for path in self._extra_skills)
        return roots

    def _load_skills(self) -> list[Skill]:
        skills: dict[str, Skill] = {}
        seen_files: set[Path] = set()
        for root, source in self._skill_roots():
            if not root.exists():
                continue
            for file in _discover_skill_files(root):
                real = file.resolve()
                if real in seen_files:
                    continue  # the same skill reached through a symlink
                seen_files.add(real)
                skill = self._parse_skill(file, source)
                if skill is None:
                    continue
                if skill.name in skills:
                    self.diagnostics.append(
                        Diagnostic(
                            "warning",
                            file,
                            f"skill name {skill.name!r} already defined by "
                            f"{skills[skill.name].file_path}; this one is ignored",
                        )
                    )
                    continue
                skills[skill.name] = skill
        return list(skills.values())

    def _parse_skill(self, file: Path, source: str) -> Skill | None:
        text = self._read(file)
        if text is None:
            return None
        try:
            meta, _ = split_frontmatter(text)
        except ValueError as exc:
            self.diagnostics.append(Diagnostic("error", file, str(exc)))
            return None
        description = meta.get("description")
        if not isinstance(description, str) or not description.strip():
            self.diagnostics.append(
                Diagnostic("error", file, "skill has no 'description' in its front matter; skipped")
            )
            return None
        parent = file.parent.name if file.name == _SKILL_FILE else file.stem
        name = str(meta.get("name") or parent)
        for problem in _skill_name_problems(name, parent):
            self.diagnostics.append(Diagnostic("warning", file, problem))
        if len(description) > _MAX_SKILL_DESCRIPTION:
            self.diagnostics.append(
                Diagnostic(
                    "warning", file, f"description longer than {_MAX_SKILL_DESCRIPTION} chars"
                )
            )
        return Skill(
            name=name,
            description=description.strip(),
            file_path=file,
            base_dir=file.parent,
            source=source,
            disable_model_invocation=bool(meta.get("disable-model-invocation", False)),
        )

    # -- prompt templates ------------------------------------------------------------------

    def _load_prompts(self) -> list[PromptTemplate]:
        directories: list[Path] = []
        if self.agent_dir is not None:
            directories.append(self.agent_dir / "prompts")
        directories.extend(d / "prompts" for d in self._project_dirs())
        directories.extend(self._extra_prompts)
        templates: dict[str, PromptTemplate] = {}
        for directory in directories:
            files = [directory] if directory.is_file() else sorted(directory.glob("*.md"))
            for file in files:
                text = self._read(file)
                if text is None:
                    continue
                try:
                    meta, body = split_frontmatter(text)
                except ValueError as exc:
                    self.diagnostics.append(Diagnostic("error", file, str(exc)))
                    continue
                description = meta.get("description")
                if not isinstance(description, str) or not description.strip():
                    description = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
                templates[file.stem] = PromptTemplate(file.stem, description, body.strip(), file)
        return list(templates.values())

    def expand_prompt_template(self, text: str) -> str:
        """`/name args` becomes the template with its arguments substituted; other text as is."""
        if not text.startswith("/"):
            return text
        name, _, rest = text[1:].partition(" ")
        template = next((t for t in self.prompt_templates if t.name == name), None)
        if template is None:
            return text
        return substitute_arguments(template.content, split_arguments(rest))


def split_arguments(text: str) -> list[str]:
    """Arguments split on whitespace with "..." and '...' quoting (unbalanced quotes tolerated)."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


_POSITIONAL = re.compile(r"\$(\d+)")
_SLICE = re.compile(r"\$\{@:(\d+)(?::(\d+))?\}")


def substitute_arguments(template: str, args: list[str]) -> str:
    """pi's order: $1..$N, then ${@:N} / ${@:N:L}, then $ARGUMENTS and $@. Not recursive."""

    def positional(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        return args[index] if 0 <= index < len(args) else ""

    def sliced(match: re.Match[str]) -> str:
        start = max(int(match.group(1)) - 1, 0)
        length = match.group(2)
        end = start + int(length) if length is not None else None
        return " ".join(args[start:end])

    # one pass over all placeholders so substituted text is never substituted again
    pattern = re.compile(r"\$\{@:\d+(?::\d+)?\}|\$ARGUMENTS|\$@|\$\d+")
    joined = " ".join(args)

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("${"):
            slice_match = _SLICE.fullmatch(token)
            return sliced(slice_match) if slice_match else token
        if token in ("$ARGUMENTS", "$@"):
            return joined
        positional_match = _POSITIONAL.fullmatch(token)
        return positional(positional_match) if positional_match else token

    return pattern.sub(replace, template)


def _discover_skill_files(root: Path) -> Iterable[Path]:
    """A dir with SKILL.md is one skill; else root-level *.md files and subdirs' SKILL.md."""
    if (root / _SKILL_FILE).is_file():
        yield root / _SKILL_FILE
        return
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name in _SKIPPED_DIRS:
            continue
        if entry.is_file() and entry.suffix == ".md":
            yield entry
        elif entry.is_dir():
            yield from _discover_nested(entry)


def _discover_nested(directory: Path) -> Iterable[Path]:
    if (directory / _SKILL_FILE).is_file():
        yield directory / _SKILL_FILE
        return
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.name.startswith(".") and entry.name not in _SKIPPED_DIRS:
            yield from _discover_nested(entry)


def _skill_name_problems(name: str, parent: str) -> list[str]:
    problems = []
    if name != parent:
        problems.append(f"skill name {name!r} does not match its directory {parent!r}")
    if len(name) > _MAX_SKILL_NAME:
        problems.append(f"skill name longer than {_MAX_SKILL_NAME} chars")
    if not _SKILL_NAME.match(name):
        problems.append("skill name should use only a-z, 0-9 and '-'")
    if name.startswith("-") or name.endswith("-") or "--" in name:
        problems.append("skill name has a leading/trailing or double hyphen")
    return problems
