from __future__ import annotations

from pathlib import Path

from clawpi.sdk.resources import ResourceLoader, split_arguments, substitute_arguments


def make_skill(root: Path, name: str, front: str) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    path = directory / "SKILL.md"
    path.write_text(f"---\n{front}\n---\n# {name}\nBody\n")
    return path


def test_context_files_agent_dir_first_then_root_down_to_cwd(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    project = tmp_path / "repo"
    cwd = project / "pkg"
    cwd.mkdir(parents=True)
    agent.mkdir()
    (agent / "AGENTS.md").write_text("global")
    (project / "CLAUDE.md").write_text("repo rules")
    (cwd / "AGENTS.md").write_text("pkg rules")
    (cwd / "CLAUDE.md").write_text("ignored: AGENTS.md wins in the same directory")
    loader = ResourceLoader(cwd, agent)
    assert [f.content for f in loader.context_files] == ["global", "repo rules", "pkg rules"]


def test_system_prompt_files_and_literal_flags(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "SYSTEM.md").write_text("agent system")
    (agent / "APPEND_SYSTEM.md").write_text("agent append")
    loader = ResourceLoader(tmp_path, agent)
    assert loader.system_prompt == "agent system"
    assert loader.append_system_prompt == "agent append"
    (tmp_path / ".clawpi").mkdir()
    (tmp_path / ".clawpi" / "SYSTEM.md").write_text("project system")
    assert ResourceLoader(tmp_path, agent).system_prompt == "project system"
    flagged = ResourceLoader(tmp_path, agent, system_prompt="You are terse.")
    assert flagged.system_prompt == "You are terse."
    prompt_file = tmp_path / "p.txt"
    prompt_file.write_text("from a file")
    assert (
        ResourceLoader(tmp_path, agent, system_prompt=str(prompt_file)).system_prompt
        == "from a file"
    )


def test_skills_are_discovered_validated_and_first_wins(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    make_skill(agent / "skills", "pdf-tools", "name: pdf-tools\ndescription: Work with PDFs")
    make_skill(agent / "skills", "no-desc", "name: no-desc")
    make_skill(agent / "skills", "Bad_Name", "description: odd name")
    project_skills = tmp_path / ".clawpi" / "skills"
    make_skill(project_skills, "pdf-tools", "description: shadowed")
    make_skill(project_skills, "hidden", "description: internal\ndisable-model-invocation: true")
    broken = project_skills / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\ndescription: [unclosed\n---\n")
    loader = ResourceLoader(tmp_path, agent)
    by_name = {s.name: s for s in loader.skills}
    assert set(by_name) == {"pdf-tools", "Bad_Name", "hidden"}
    assert by_name["pdf-tools"].description == "Work with PDFs"
    assert by_name["hidden"].disable_model_invocation is True
    messages = [str(d) for d in loader.diagnostics]
    assert any("no 'description'" in m for m in messages)
    assert any("already defined" in m for m in messages)
    assert any("a-z, 0-9" in m for m in messages)
    assert any("invalid front matter" in m for m in messages)


def test_prompt_templates_and_argument_substitution(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "prompts").mkdir(parents=True)
    (agent / "prompts" / "review.md").write_text(
        "---\ndescription: Review a file\n---\nReview $1 focusing on $2. All: $ARGUMENTS. Rest: ${@:2}"
    )
    (agent / "prompts" / "plain.md").write_text("\nFirst line is the description\nmore")
    loader = ResourceLoader(tmp_path, agent)
    names = {t.name: t.description for t in loader.prompt_templates}
    assert names == {"review": "Review a file", "plain": "First line is the description"}
    expanded = loader.expand_prompt_template('/review src/a.py "error handling"')
    assert expanded == (
        "Review src/a.py focusing on error handling. All: src/a.py error handling. Rest: error handling"
    )
    assert loader.expand_prompt_template("/unknown x") == "/unknown x"
    assert loader.expand_prompt_template("no slash") == "no slash"


def test_substitution_is_not_recursive_and_missing_args_are_empty() -> None:
    assert substitute_arguments("[$1][$3]", ["$2", "b"]) == "[$2][]"
    assert substitute_arguments("${@:1:2}|$@", ["a", "b", "c"]) == "a b|a b c"
    assert split_arguments("one 'two three' \"four") == ["one", "'two", "three'", '"four']
