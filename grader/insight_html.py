"""The class report as one HTML page (``python -m grader.insight --html FILE``): figures embedded as
base64 PNG (``grader.insight_figures``), inline CSS, no script, no font or stylesheet from the web, so
it opens offline and from an e-mail attachment alike."""
from html import escape

from grader import insight_figures as figures
from grader.insight import TROUBLE, exercises, mistake_text, mistakes, say, troubled

STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; }
.figs img { margin-right: 1em; vertical-align: top; }
section.exercise { border-top: 1px solid #ddd; margin-top: 1.5em; }
"""


def _img(data, alt):
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def _mistake_table(found, students, lang):
    head = "".join(f"<th>{escape(say(k, lang))}</th>" for k in ("mistake", "students_col", "share", "failing_case"))
    rows = "".join(
        f"<tr><td><code>{escape(m.id)}</code><br>{escape(mistake_text(m.id, lang))}</td><td class=n>{m.count}</td>"
        f"<td class=n>{100 * m.count / students:.0f} %</td><td>{escape(m.example)}</td></tr>" for m in found)
    return f"<table><tr>{head}</tr>{rows}</table>"


def overview(chosen, names):
    """The class at a glance (base64 PNG): the heat map of students x the graded cells ``chosen``."""
    order = list(names)  # ids sorted, or pseudonyms by rank
    cells = {(f.student, e.assignment, e.grade_id): f for e in chosen for f in e.findings}
    fractions, kinds = [], []
    for student in order:
        for e in chosen:
            f = cells.get((student, e.assignment, e.grade_id))
            fractions.append(float("nan") if f is None else (f.score or 0.0) / (f.max_score or 1.0))
            kinds.append(None if f is None else f.kind)
    columns = [f"{e.assignment[:2]} {e.grade_id}"[:32] for e in chosen]
    return figures.class_heatmap([names[s] for s in order], columns, fractions, kinds, "Class overview")


def _exercise(exercise, names, lang):
    n = len(exercise.findings)
    parts = [f"<section class=exercise><h3>{escape(exercise.grade_id)}</h3>",
             f"<p>{escape(say('passed_of', lang, k=exercise.passed, n=n, rate=100 * exercise.rate))}</p>"]
    found = mistakes(exercise.findings)
    figs = [_img(figures.score_histogram([f.score or 0.0 for f in exercise.findings], exercise.max_score,
                                         f"{exercise.grade_id}: scores"), say("scores", lang))]
    if found:
        figs.append(_img(figures.mistake_chart([m.id for m in found], [m.count for m in found], n,
                                               f"{exercise.grade_id}: named mistakes"), say("named", lang)))
    parts.append(f"<div class=figs>{''.join(figs)}</div>")
    parts.append(_mistake_table(found, n, lang) if found else f"<p>{escape(say('no_mistakes', lang))}</p>")
    trouble = troubled(exercise.findings)
    if trouble:
        parts.append("<ul>" + "".join(
            f"<li>{escape(say(kind, lang))}: {escape(', '.join(names[s] for s in trouble[kind]))}</li>"
            for kind in TROUBLE if kind in trouble) + "</ul>")
    return "".join(parts) + "</section>"


def page(findings, names, lang):
    """The whole report; ``names`` labels each student (ids, or pseudonyms with ``--anonymous``)."""
    chosen = exercises(findings)
    assignments = sorted({e.assignment for e in chosen})
    title = say("title", lang)
    counts = f"{say('students', lang, n=len(names))}, {say('assignments', lang, n=len(assignments))}"
    body = [f"<h1>{escape(title)}</h1>", f"<p>{escape(counts)}</p>",
            f"<h2>{escape(say('overview', lang))}</h2>", _img(overview(chosen, names), say("overview", lang)),
            f"<p>{escape(say('legend', lang))}</p>"]
    for assignment in assignments:
        own = [e for e in chosen if e.assignment == assignment]
        students = len({f.student for e in own for f in e.findings})
        body.append(f"<h2>{escape(assignment)} ({escape(say('submissions', lang, n=students))})</h2>")
        body.append(_img(figures.pass_rate_chart([e.grade_id for e in own], [e.rate for e in own],
                                                 f"{assignment}: pass rates"), say("pass_rates", lang)))
        top = mistakes([f for e in own for f in e.findings])
        body.append(f"<h3>{escape(say('top_mistakes', lang))}</h3>")
        body.append(_mistake_table(top, students, lang) if top else f"<p>{escape(say('no_mistakes', lang))}</p>")
        body += [_exercise(e, names, lang) for e in own]
    html_lang = "zh-CN" if lang == "zh" else "en"
    return (f'<!DOCTYPE html>\n<html lang="{html_lang}"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")
