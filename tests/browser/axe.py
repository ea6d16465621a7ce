"""Accessibility checks with the vendored axe-core (``vendor/axe-core/axe.min.js``).

The script is evaluated in the page through the DevTools protocol, which the page's
Content-Security-Policy does not govern, so the app's CSP stays as it is in the test.
"""

from __future__ import annotations

from pathlib import Path

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


def axe_violations(page, *, impacts: tuple[str, ...] = BLOCKING) -> list[dict]:
    """The page's axe violations of the given impacts (WCAG 2.x A and AA rules + best
    practices), each with its rule id, help text and the first offending nodes."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    result = page.evaluate(
        """async () => {
            const r = await axe.run(document, {resultTypes: ["violations"]});
            return r.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ") + " :: " + n.failureSummary)
            }));
        }"""
    )
    return [v for v in result if v["impact"] in impacts]


def describe(violations: list[dict]) -> str:
    return "\n".join(
        f"{v['impact']} {v['id']}: {v['help']}\n  " + "\n  ".join(v["nodes"]) for v in violations
    )
