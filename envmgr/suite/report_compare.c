#include "envmgr/suite/report_compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/exit_cause.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/suite/report_summary.h"
#include "envmgr/suite/results_log.h"
#include "envmgr/suite/suite.h"
#include "envmgr/base/util.h"

/* task id -> {score: the mean over its scored repeats, n: how many, worst: the line that explains it;
 * unsupported: true, or noscore: true when no repeat has a score (each crashed, its setup could not
 * run, or its evaluator failed: worst is such a line)} */
static json_t *per_task(json_t *final)
{
    json_t *out = json_object(), *line;
    const char *key;
    json_object_foreach(final, key, line)
    {
        const char *id = json_string_value(json_object_get(line, "task_id"));
        double score = json_number_value(json_object_get(line, "score"));
        json_t *t = json_object_get(out, id);
        if (exit_cause_from_name(json_string_value(json_object_get(line, "exit_cause"))) == EXIT_UNSUPPORTED) {
            if (!t) /* no score: the task is marked, its repeats (if any scored) are not */
                json_object_set_new(out, id, json_pack("{s:f, s:i, s:O, s:b}", "sum", 0.0, "n", 0, "worst", line,
                                                       "unsupported", 1));
            continue;
        }
        if (t && json_is_true(json_object_get(t, "unsupported"))) {
            json_object_del(t, "unsupported");
            json_object_set(t, "worst", line);
        }
        if (!t) {
            t = json_pack("{s:f, s:i, s:O}", "sum", 0.0, "n", 0, "worst", line);
            json_object_set_new(out, id, t);
        }
        if (!report_scored(line)) { /* no score: neither a 0 in the mean nor the task's score */
            if (json_integer_value(json_object_get(t, "n")) == 0)
                json_object_set(t, "worst", line);
            continue;
        }
        json_int_t n = json_integer_value(json_object_get(t, "n"));
        json_object_set_new(t, "sum", json_real(json_number_value(json_object_get(t, "sum")) + score));
        json_object_set_new(t, "n", json_integer(n + 1));
        if (n == 0 || score < json_number_value(json_object_get(json_object_get(t, "worst"), "score")))
            json_object_set(t, "worst", line);
    }
    json_object_foreach(out, key, line)
    {
        json_int_t n = json_integer_value(json_object_get(line, "n"));
        json_object_set_new(line, "score", json_real(n ? json_number_value(json_object_get(line, "sum")) / (double)n : 0));
        if (!n && !json_is_true(json_object_get(line, "unsupported")))
            json_object_set_new(line, "noscore", json_true());
    }
    return out;
}

/* A per_task entry's score, NAN when it has none (unsupported, or no repeat scored). */
static double score_of(json_t *t)
{
    if (json_is_true(json_object_get(t, "unsupported")) || json_is_true(json_object_get(t, "noscore")))
        return NAN;
    return json_number_value(json_object_get(t, "score"));
}

/* What happened to a task, in the order the lines are printed. */
enum change_kind { REGRESSED, MISSING, NO_SCORE_NOW, IMPROVED, ADDED, NOW_UNSUPPORTED, NOW_SUPPORTED, SCORED_AGAIN };

typedef struct change {
    const char *id;
    enum change_kind kind;
    double base, cur;
    json_t *why; /* the line that explains the new score (borrowed) */
} change;

static int cmp_change(const void *a, const void *b)
{
    const change *x = a, *y = b;
    if (x->kind != y->kind)
        return (int)x->kind - (int)y->kind;
    double dx = x->cur - x->base, dy = y->cur - y->base;
    if (x->kind == REGRESSED && dx != dy) /* the biggest drop first */
        return dx < dy ? -1 : 1;
    return strcmp(x->id, y->id);
}

void report_compare(json_t *base_final, json_t *new_final, double tolerance, FILE *out, report_cmp *c)
{
    memset(c, 0, sizeof *c);
    json_t *b = per_task(base_final), *n = per_task(new_final), *t;
    size_t cap = json_object_size(b) + json_object_size(n), k = 0;
    change *ch = xcalloc(cap ? cap : 1, sizeof *ch);
    const char *id;
    json_object_foreach(b, id, t)
    {
        json_t *u = json_object_get(n, id);
        double bs = score_of(t);
        bool bu = json_is_true(json_object_get(t, "unsupported")), nu = u && json_is_true(json_object_get(u, "unsupported"));
        bool bx = json_is_true(json_object_get(t, "noscore")), nx = u && json_is_true(json_object_get(u, "noscore"));
        double ns = u ? score_of(u) : NAN;
        if (u && (bu || nu)) { /* unsupported is not a score: never a regression nor an improvement */
            if (bu && nu)
                c->unsupported++;
            else
                ch[k++] = (change){id, bu ? NOW_SUPPORTED : NOW_UNSUPPORTED, bs, ns, json_object_get(u, "worst")};
            continue;
        }
        if (!u) {
            ch[k++] = (change){id, MISSING, bs, NAN, NULL};
            continue;
        }
        if (bx || nx) { /* a run that could not score a task measured nothing about it */
            if (bx && nx)
                c->unscored++;
            else
                ch[k++] = (change){id, nx ? NO_SCORE_NOW : SCORED_AGAIN, bs, ns, json_object_get(u, "worst")};
            continue;
        }
        if (fabs(ns - bs) <= tolerance)
            c->unchanged++;
        else
            ch[k++] = (change){id, ns < bs ? REGRESSED : IMPROVED, bs, ns, json_object_get(u, "worst")};
    }
    json_object_foreach(n, id, t)
    if (!json_object_get(b, id))
        ch[k++] = (change){id, ADDED, NAN, score_of(t), json_object_get(t, "worst")};
    qsort(ch, k, sizeof *ch, cmp_change);
    static const char *label[] = {[REGRESSED] = "REGRESSED",         [MISSING] = "MISSING",
                                  [NO_SCORE_NOW] = "NO SCORE",        [IMPROVED] = "IMPROVED",
                                  [ADDED] = "NEW",                    [NOW_UNSUPPORTED] = "UNSUPPORTED",
                                  [NOW_SUPPORTED] = "SUPPORTED",      [SCORED_AGAIN] = "SCORED"};
    size_t *counter[] = {[REGRESSED] = &c->regressed,           [MISSING] = &c->missing,
                         [NO_SCORE_NOW] = &c->now_unscored,     [IMPROVED] = &c->improved,
                         [ADDED] = &c->added,                   [NOW_UNSUPPORTED] = &c->now_unsupported,
                         [NOW_SUPPORTED] = &c->now_supported,   [SCORED_AGAIN] = &c->scored_again};
    for (size_t i = 0; i < k; i++) {
        (*counter[ch[i].kind])++;
        sbuf s = {0};
        sbuf_add_visible(&s, ch[i].id, 128);
        char bs[16] = "-", ns[16] = "-";
        if (!isnan(ch[i].base))
            snprintf(bs, sizeof bs, "%.2f", ch[i].base);
        if (!isnan(ch[i].cur))
            snprintf(ns, sizeof ns, "%.2f", ch[i].cur);
        fprintf(out, "%-9s  %-40s %5s -> %-5s", label[ch[i].kind], s.s, bs, ns);
        sbuf_release(&s);
        if (ch[i].kind == MISSING)
            fputs("  (not in the new run)", out);
        else if (ch[i].why && (ch[i].kind == REGRESSED || ch[i].kind == NO_SCORE_NOW || ch[i].kind == NOW_UNSUPPORTED)) {
            const char *cause = json_string_value(json_object_get(ch[i].why, "exit_cause"));
            const char *reason = json_string_value(json_object_get(ch[i].why, "reason"));
            sbuf r = {0};
            sbuf_add_visible(&r, reason ? reason : "", 160);
            fprintf(out, "  (%s: %s)", cause ? cause : "?", r.s ? r.s : "");
            sbuf_release(&r);
        }
        fputc('\n', out);
    }
    fprintf(out, "%zu regressed, %zu missing, %zu improved, %zu new, %zu unchanged", c->regressed, c->missing,
            c->improved, c->added, c->unchanged);
    if (c->unscored || c->now_unscored || c->scored_again)
        fprintf(out, "; no score (crashed, setup_error or evaluator_error in every repeat): %zu in both, %zu now, "
                     "%zu no longer",
                c->unscored, c->now_unscored, c->scored_again);
    if (c->unsupported || c->now_unsupported || c->now_supported)
        fprintf(out, "; unsupported (not scored): %zu in both, %zu now, %zu no longer", c->unsupported,
                c->now_unsupported, c->now_supported);
    fputc('\n', out);
    free(ch);
    json_decref(b);
    json_decref(n);
}

static int load_final(const char *dir, json_t **final, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/" SUITE_RESULTS_FILE, dir);
    json_t *lines;
    if (access(path, R_OK) != 0)
        return em_fail_errno(err, "`%s`", path);
    if (results_read(path, &lines, NULL, err) < 0)
        return -1;
    *final = results_final(lines);
    json_decref(lines);
    return 0;
}

int report_compare_dirs(const char *base, const char *cur, double tolerance, FILE *out, report_cmp *c, em_err *err)
{
    json_t *bf, *nf;
    if (load_final(base, &bf, err) < 0)
        return -1;
    if (load_final(cur, &nf, err) < 0) {
        json_decref(bf);
        return -1;
    }
    report_compare(bf, nf, tolerance, out, c);
    json_decref(bf);
    json_decref(nf);
    return 0;
}
