/* OSWorld's rule_relativeTime: day phrases ("tomorrow", "next week Saturday", ...) become dates,
 * written into the rule's expected format strings ({DoW}, {Month}, {Day0D}, ...). Today is the
 * guest's local date (OSWorld-Verified reads the VM's clock), or the date in rules.timezone when
 * the task names one (read on the host, where the time-zone database is, as OSWorld does);
 * without an env, the host's local date. Date arithmetic is done in UTC at noon, so no daylight
 * saving shift can move a day. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "envmgr/base/sbuf.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "evaluator/getter_call.h"
#include "evaluator/getters.h"

#define DATE_TIMEOUT_S 10.0
#define TIMEZONE_MAX 64

/* OSWorld's phrases. SPLIT_FROM / SPLIT_TO fill puDay/puMonth/puYear or doDay/doMonth/doYear
 * instead of "from" / "to". */
enum { ANYWHERE, SPLIT_FROM, SPLIT_TO };
static const struct {
    const char *name;
    int where;
} phrases[] = {
    {"tomorrow", ANYWHERE},
    {"5th next month", ANYWHERE},
    {"10th next month", ANYWHERE},
    {"11th next month", ANYWHERE},
    {"this month", ANYWHERE},
    {"this Saturday", ANYWHERE},
    {"this Sunday", ANYWHERE},
    {"next Monday", ANYWHERE},
    {"next Friday", ANYWHERE},
    {"next Saturday", ANYWHERE},
    {"next Sunday", ANYWHERE},
    {"next week Friday", ANYWHERE},
    {"next week Saturday", ANYWHERE},
    {"next week Sunday", ANYWHERE},
    {"first monday four months later", ANYWHERE},
    {"first monday eight months later", ANYWHERE},
    {"next Monday split", SPLIT_FROM},
    {"next Friday split", SPLIT_TO},
};

static const char *const split_keys[][3] = {{"puDay", "puMonth", "puYear"}, {"doDay", "doMonth", "doYear"}};

static int phrase_where(const char *s)
{
    for (size_t i = 0; s && i < ARRAY_LEN(phrases); i++)
        if (!strcmp(phrases[i].name, s))
            return phrases[i].where;
    return -1;
}

static bool is_format(json_t *v, bool list_ok)
{
    if (json_is_string(v))
        return true;
    if (!list_ok || !json_is_array(v))
        return false;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (!json_is_string(e)) return false;
    return true;
}

/* An IANA zone name (America/New_York, UTC, Etc/GMT+5): letters, digits, / _ + -, no `..`. */
static bool zone_name_ok(const char *z)
{
    size_t n = strlen(z);
    if (!n || n > TIMEZONE_MAX || z[0] == '/' || z[0] == '-' || strstr(z, ".."))
        return false;
    for (const char *s = z; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("/_+-", *s))
            return false;
    return true;
}

/* rules: {relativeTime: {from, to?}, expected: {...formats}, timezone?}. A phrase alone fills
 * expected.time (a format string or a list of them); with `to`, expected.from and expected.to
 * (or the split forms' day/month/year keys). */
static int check_relative_time(json_t *spec, em_err *err)
{
    json_t *rules = json_object_get(spec, "rules");
    json_t *rel = json_object_get(rules, "relativeTime"), *exp = json_object_get(rules, "expected");
    json_t *tz = json_object_get(rules, "timezone");
    if (!json_is_object(rules))
        return em_fail_input(err, "rules: expected an object with relativeTime and expected");
    if (!json_is_object(rel) || !json_is_object(exp))
        return em_fail_input(err, "rules: relativeTime and expected must be objects");
    if (tz && (!json_is_string(tz) || !zone_name_ok(json_string_value(tz))))
        return em_fail_input(err, "rules.timezone: expected a time-zone name such as \"America/New_York\"");
    const char *keys[] = {"from", "to"};
    bool has_to = json_object_get(rel, "to") != NULL;
    for (int k = 0; k < (has_to ? 2 : 1); k++) {
        int where = phrase_where(json_string_value(json_object_get(rel, keys[k])));
        if (where < 0)
            return em_fail_input(err, "rules.relativeTime.%s: expected one of OSWorld's day phrases (\"tomorrow\", "
                                      "\"next Monday\", \"next week Saturday\", ...)", keys[k]);
        if (where != ANYWHERE && (!has_to || where != (k == 0 ? SPLIT_FROM : SPLIT_TO)))
            return em_fail_input(err, "rules.relativeTime.%s: `%s` is a %s phrase (with a `to`)", keys[k],
                                 json_string_value(json_object_get(rel, keys[k])), where == SPLIT_FROM ? "from" : "to");
        if (where != ANYWHERE) {
            for (int i = 0; i < 3; i++)
                if (!json_is_string(json_object_get(exp, split_keys[where - 1][i])))
                    return em_fail_input(err, "rules.expected.%s: expected a format string", split_keys[where - 1][i]);
            continue;
        }
        const char *fk = has_to ? keys[k] : "time";
        if (!is_format(json_object_get(exp, fk), !has_to))
            return em_fail_input(err, "rules.expected.%s: expected a format string%s", fk,
                                 has_to ? "" : " or a list of them");
    }
    return 0;
}

/* ---- today ---- */

static int parse_date(const char *s, struct tm *t)
{
    int y, m, d;
    if (!s || sscanf(s, "%d-%d-%d", &y, &m, &d) != 3 || y < 1900 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31)
        return -1;
    *t = (struct tm){.tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = d, .tm_hour = 12};
    timegm(t);
    return 0;
}

/* `date +%F` in zone on the host (TZ set for the child alone: setenv is not thread-safe). */
static int host_date_in(const char *zone, struct tm *t, em_err *err)
{
    _cleanup_free_ char *tz = xasprintf("TZ=:%s", zone);
    const char *const argv[] = {"date", "+%F", NULL};
    const char *const envp[] = {tz, "PATH=/usr/bin:/bin", NULL};
    spawn_opts so = {.argv = argv, .envp = envp};
    spawn_io io = {.out_cap = 256, .err_cap = 1024, .timeout_ms = DATE_TIMEOUT_S * 1000};
    spawn_result r;
    if (spawn_run(&so, &io, &r, err) < 0)
        return em_prefix(err, "rule_relativeTime: ");
    int rc = parse_date(r.out, t) < 0 ? em_fail(err, "rule_relativeTime: `date` in %s gave no date", zone) : 0;
    spawn_result_free(&r);
    return rc;
}

/* Today: in rules.timezone, else the guest's local date, else (no env) the host's. */
static int today(const getter_call *gc, const char *zone, struct tm *t, em_err *err)
{
    if (zone)
        return host_date_in(zone, t, err);
    if (!gc->ops || !gc->ops->exec) {
        time_t now = time(NULL);
        struct tm lt;
        localtime_r(&now, &lt);
        char s[32];
        strftime(s, sizeof s, "%F", &lt);
        return parse_date(s, t);
    }
    const char *const argv[] = {"date", "+%F", NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (getter_exec(gc->ops, "rule_relativeTime", argv, 0, DATE_TIMEOUT_S, 256, &out, &len, &code, err) < 0)
        return -1;
    if (code != 0 || parse_date(out, t) < 0)
        return em_fail(err, "rule_relativeTime: the guest's `date` gave no date (status %d)", code);
    return 0;
}

/* ---- phrases → days ---- */

static struct tm add_days(struct tm t, int days)
{
    t.tm_mday += days;
    timegm(&t);
    return t;
}

static struct tm month_day(struct tm t, int months_ahead, int mday)
{
    t.tm_mon += months_ahead;
    t.tm_mday = mday;
    timegm(&t);
    return t;
}

static int py_weekday(const struct tm *t) /* Monday 0 .. Sunday 6, as Python's weekday() */
{
    return (t->tm_wday + 6) % 7;
}

static struct tm first_monday(struct tm t, int months_ahead)
{
    t = month_day(t, months_ahead, 1);
    return add_days(t, (7 - py_weekday(&t)) % 7);
}

static bool is(const char *a, const char *b)
{
    return a && !strcmp(a, b);
}

/* One phrase as OSWorld computes it from today (wd: today's weekday); "to" phrases that depend
 * on the "from" day get it. OSWorld's "first monday four/eight months later" are plain calendar
 * arithmetic here (its own month formula fails in August and April). */
static struct tm relative_day(const char *p, const struct tm *now, const char *from_phrase, const struct tm *from)
{
    int wd = py_weekday(now);
    if (is(p, "tomorrow"))
        return add_days(*now, 1);
    if (is(p, "5th next month") || is(p, "10th next month") || is(p, "11th next month"))
        return month_day(*now, 1, atoi(p));
    if (is(p, "this Saturday"))
        return add_days(*now, 5 - wd);
    if (is(p, "this Sunday"))
        return add_days(*now, 6 - wd);
    if (is(p, "next Monday") || is(p, "next Monday split"))
        return add_days(*now, 7 - wd);
    if (is(p, "next Friday") || is(p, "next Friday split")) {
        if (from && (is(from_phrase, "next Monday") || is(from_phrase, "next Monday split")))
            return add_days(*from, 4);
        return add_days(*now, wd < 4 ? 4 - wd : 11 - wd);
    }
    if (is(p, "next Saturday"))
        return add_days(*now, wd < 5 ? 5 - wd : wd == 5 ? 7 : 6);
    if (is(p, "next Sunday")) {
        if (from && (is(from_phrase, "next Friday") || is(from_phrase, "next Saturday")))
            return add_days(*from, 6 - py_weekday(from));
        return add_days(*now, wd < 6 ? 6 - wd : 7);
    }
    if (is(p, "next week Friday"))
        return add_days(*now, 11 - wd);
    if (is(p, "next week Saturday"))
        return add_days(*now, 12 - wd);
    if (is(p, "next week Sunday"))
        return add_days(*now, 13 - wd);
    if (is(p, "first monday four months later"))
        return first_monday(*now, 4);
    if (is(p, "first monday eight months later"))
        return first_monday(*now, 8);
    return *now; /* "this month": today */
}

/* ---- formats ---- */

static void replace_first(sbuf *b, const char *token, const char *value)
{
    char *at = b->s ? strstr(b->s, token) : NULL;
    if (!at)
        return;
    sbuf out = {0};
    sbuf_add(&out, b->s, (size_t)(at - b->s));
    sbuf_puts(&out, value);
    sbuf_puts(&out, at + strlen(token));
    sbuf_release(b);
    *b = out;
}

/* OSWorld's tokens, each replaced once, in its order. */
static json_t *format_day(json_t *fmt, const struct tm *t)
{
    if (json_is_array(fmt)) {
        json_t *out = json_array(), *e;
        size_t i;
        json_array_foreach(fmt, i, e) json_array_append_new(out, format_day(e, t));
        return out;
    }
    static const char *const dow[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static const char *const full[] = {"January", "February", "March",     "April",   "May",      "June",
                                       "July",    "August",   "September", "October", "November", "December"};
    char day[16], year[16], m0[16], d0[16], lower[16], md[16];
    snprintf(day, sizeof day, "%d", t->tm_mday);
    snprintf(year, sizeof year, "%d", t->tm_year + 1900);
    snprintf(m0, sizeof m0, "%02d", t->tm_mon + 1);
    snprintf(d0, sizeof d0, "%02d", t->tm_mday);
    snprintf(md, sizeof md, "%d", t->tm_mon + 1);
    snprintf(lower, sizeof lower, "%s", full[t->tm_mon]);
    lower[0] = (char)tolower((unsigned char)lower[0]);
    sbuf b = {0};
    sbuf_puts(&b, json_string_value(fmt));
    const char *const tokens[][2] = {{"{DoW}", dow[py_weekday(t)]}, {"{Month}", mon[t->tm_mon]}, {"{DayD}", day},
                                     {"{Year}", year},  {"{Month0D}", m0}, {"{month}", lower},
                                     {"{MonthFull}", full[t->tm_mon]}, {"{Day0D}", d0}, {"{MonthD}", md}};
    for (size_t i = 0; i < ARRAY_LEN(tokens); i++)
        replace_first(&b, tokens[i][0], tokens[i][1]);
    json_t *v = json_string(b.s ? b.s : "");
    sbuf_release(&b);
    return v;
}

/* Write the day into expected: key (a phrase alone: "time"), or a split phrase's three keys. */
static void fill(json_t *exp, const char *phrase, const char *key, const struct tm *day)
{
    int where = phrase_where(phrase);
    if (where == ANYWHERE) {
        json_object_set_new(exp, key, format_day(json_object_get(exp, key), day));
        return;
    }
    for (int i = 0; i < 3; i++) {
        const char *k = split_keys[where - 1][i];
        json_object_set_new(exp, k, format_day(json_object_get(exp, k), day));
    }
}

static int run_relative_time(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    json_t *rules = json_deep_copy(json_object_get(spec, "rules"));
    json_t *rel = json_object_get(rules, "relativeTime"), *exp = json_object_get(rules, "expected");
    const char *from = json_string_value(json_object_get(rel, "from"));
    const char *to = json_string_value(json_object_get(rel, "to"));
    struct tm now;
    if (today(gc, json_string_value(json_object_get(rules, "timezone")), &now, err) < 0) {
        json_decref(rules);
        return -1;
    }
    struct tm from_day = relative_day(from, &now, NULL, NULL);
    fill(exp, from, to ? "from" : "time", &from_day);
    if (to) {
        struct tm to_day = relative_day(to, &now, from, &from_day);
        fill(exp, to, "to", &to_day);
    }
    *art = getter_json_artifact(rules);
    return 0;
}

static const getter_def defs[] = {
    {"rule_relativeTime", check_relative_time, run_relative_time, false,
     "every day phrase of OSWorld-Verified (tomorrow, next Monday, next week Saturday, first monday eight months "
     "later, the split forms, ...) and its tokens ({DoW}, {Month}, {Day0D}, {MonthD}, ...); a time format may be a "
     "list; today is the guest's local date (as OSWorld-Verified reads the VM's clock), or the host's date in "
     "rules.timezone"},
};

const getter_def *getter_time_defs(size_t *n)
{
    *n = ARRAY_LEN(defs);
    return defs;
}
