"""The TUI uses Textual's public API only: no `textual._*` import, and no read, call, override
or assignment of an underscore name that Textual's own classes have (issue 15).

Textual's private names are collected from its classes and from fresh instances (attributes
set in __init__), so a clash with an attribute of our own (`self._cache` in a Widget
subclass, say) is caught too: it would silently clobber Textual's state.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import textual.app
import textual.containers
import textual.screen
import textual.scroll_view
import textual.widget
import textual.widgets

ROOT = Path(__file__).resolve().parents[2] / "sgltui"


def textual_private_names() -> set[str]:
    classes = {textual.app.App, textual.widget.Widget, textual.screen.Screen}
    for module in (textual.widgets, textual.containers, textual.scroll_view, textual.screen):
        for name in getattr(module, "__all__", None) or dir(module):  # widgets load lazily
            obj = getattr(module, name)
            if inspect.isclass(obj) and obj.__module__.startswith("textual"):
                classes.add(obj)
    names: set[str] = set()
    for cls in classes:
        for klass in cls.__mro__:
            if klass.__module__.startswith("textual"):
                names.update(vars(klass))
    for cls in classes:  # attributes set in __init__, from every class that builds bare
        if issubclass(cls, textual.widget.Widget) and not inspect.isabstract(cls):
            try:
                names.update(vars(cls()))
            except (TypeError, ValueError, LookupError, RuntimeError):  # needs arguments
                pass
    names.update(vars(textual.app.App()))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def files():
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "textual" in text or path.is_relative_to(ROOT / "tui"):
            yield path, ast.parse(text, filename=str(path))


def test_no_private_textual_import():
    bad = []
    for path, tree in files():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and "._" in f".{node.module}":
                if node.module.split(".")[0] == "textual":
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("textual.") and "._" in alias.name:
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno} import {alias.name}")
    assert not bad, bad


def textual_classes(trees) -> set[str]:
    """Names of classes that are Textual's or derive from one (ours included, across files)."""
    names: set[str] = set()
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("textual"):
                names.update(alias.asname or alias.name for alias in node.names)
    grew = True
    while grew:
        grew = False
        for _, tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names:
                    bases = {
                        b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                        for b in node.bases
                    }
                    if bases & names:
                        names.add(node.name)
                        grew = True
    return names


def test_no_underscore_name_of_textual_used_or_overridden():
    private = textual_private_names()
    assert "_compositor" in private and "_start_widget" in private  # the collector works
    trees = list(files())
    ours = textual_classes(trees)
    bad = []

    def check(path, node, in_textual_class):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                inside = child.name in ours
                if inside:
                    for item in child.body:  # class attributes: `_foo = ...`, methods `_foo`
                        targets = item.targets if isinstance(item, ast.Assign) else []
                        if isinstance(item, ast.AnnAssign):
                            targets = [item.target]
                        names = [t.id for t in targets if isinstance(t, ast.Name)]
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            names.append(item.name)
                        bad.extend(
                            f"{path.relative_to(ROOT)}:{item.lineno} {n}"
                            for n in names
                            if n in private
                        )
                check(path, child, inside)
                continue
            if isinstance(child, ast.Attribute) and child.attr in private:
                on_self = isinstance(child.value, ast.Name) and child.value.id in ("self", "cls")
                if in_textual_class or not on_self:
                    bad.append(f"{path.relative_to(ROOT)}:{child.lineno} {child.attr}")
            check(path, child, in_textual_class)

    for path, tree in trees:
        check(path, tree, False)
    assert not bad, bad
