#include "envmgr/action/action_reply.h"

#include <stdlib.h>
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/action/anthropic.h"
#include "envmgr/action/openai.h"
#include "envmgr/action/pyautogui.h"
#include "envmgr/action/uitars.h"
#include "envmgr/base/base64.h"
#include "envmgr/base/frame_scale.h"
#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/png.h"
#include "envmgr/base/util.h"

static const char *const names[] = {"computer_13", "pyautogui", "anthropic", "openai", "uitars"};

const char *action_space_name(action_space s)
{
    return names[s];
}

const char *action_reply_space_key(json_t *reply)
{
    for (size_t i = SPACE_PYAUTOGUI; i < ARRAY_LEN(names); i++)
        if (json_object_get(reply, names[i]))
            return names[i];
    return NULL;
}

/* A message quotes what the agent sent (a key's name, a field): it stays one line of printable
 * ASCII, so it is valid UTF-8 in JSON and cannot forge a line of a log or a terminal. */
static void one_printable_line(char *msg)
{
    for (unsigned char *c = (unsigned char *)msg; *c; c++)
        if (*c < 0x20 || *c >= 0x7f)
            *c = '?';
}

/* Each action again through computer_13's own parser, so no translator can send what it refuses. */
static int validate(json_t *actions, int w, int h, em_err *err)
{
    size_t i;
    json_t *a;
    json_array_foreach(actions, i, a)
    {
        action parsed;
        if (action_parse(a, w, h, &parsed, err) < 0)
            return -1;
        action_free(&parsed);
    }
    return 0;
}

static int decode_vendor(json_t *reply, const char *key, int w, int h, action_reply *out, em_err *err)
{
    static const char *const known[] = {[SPACE_ANTHROPIC] = " anthropic display ", [SPACE_OPENAI] = " openai display ",
                                        [SPACE_UITARS] = " uitars display coords "};
    if (jfield_refuse_unknown(reply, "", known[out->space], err) < 0 ||
        cu_geometry_make(w, h, json_object_get(reply, "display"), "display", &out->geo, err) < 0)
        return -1;
    json_t *v = json_object_get(reply, key);
    cu_result r;
    cu_result_init(&r);
    int rc;
    if (out->space == SPACE_ANTHROPIC) {
        rc = anthropic_actions(v, &out->geo, &r, err);
        if (anthropic_tool_use_id(v))
            out->call_id = xstrdup(anthropic_tool_use_id(v));
    } else if (out->space == SPACE_OPENAI) {
        rc = openai_actions(v, &out->geo, &r, err);
        if (openai_call_id(v))
            out->call_id = xstrdup(openai_call_id(v));
    } else {
        const char *coords = "absolute";
        if (!json_is_string(v))
            rc = em_fail_input(err, "uitars: expected the model's action text (a string), got %s", json_type_name(v));
        else if (jfield_str(reply, "", "coords", false, &coords, err) < 0)
            rc = -1;
        else if (coords && strcmp(coords, "absolute") && strcmp(coords, "relative_1000"))
            rc = em_fail_input(err, "coords: `%.32s` is not absolute or relative_1000", coords);
        else
            rc = uitars_actions(json_string_value(v), &out->geo,
                                coords && !strcmp(coords, "relative_1000") ? UITARS_COORDS_RELATIVE_1000
                                                                           : UITARS_COORDS_ABSOLUTE,
                                &r, err);
    }
    out->actions = r.actions;
    out->answer = r.answer;
    memcpy(out->zoom, r.zoom, sizeof out->zoom);
    out->sent = json_incref(v);
    return rc;
}

int action_reply_decode(json_t *reply, int w, int h, action_reply *out, em_err *err)
{
    *out = (action_reply){.space = SPACE_COMPUTER_13, .geo = {w, h, w, h}};
    if (!json_is_object(reply))
        return em_fail_input(err, "action: expected an object, got %s", json_type_name(reply));
    const char *key = action_reply_space_key(reply);
    int rc;
    if (!key) {
        out->actions = json_pack("[O]", reply);
        rc = 0;
    } else {
        for (size_t i = 0; i < ARRAY_LEN(names); i++)
            if (!strcmp(names[i], key))
                out->space = (action_space)i;
        if (out->space == SPACE_PYAUTOGUI) {
            json_t *code = json_object_get(reply, key);
            out->sent = json_incref(code);
            if (!json_is_string(code))
                rc = em_fail_input(err, "pyautogui: expected a string of code");
            else if (json_object_size(reply) != 1)
                rc = em_fail_input(err, "pyautogui: a pyautogui reply has no other fields (but \"response\")");
            else
                rc = pyautogui_actions(json_string_value(code), w, h, &out->actions, err);
        } else {
            rc = decode_vendor(reply, key, w, h, out, err);
        }
    }
    if (rc == 0 && out->actions && !json_array_size(out->actions)) /* a look: the frame after a settle */
        json_array_append_new(out->actions, json_pack("{s:s, s:f}", "action_type", "WAIT", "seconds", 0.0));
    if (rc == 0 && validate(out->actions, w, h, err) < 0)
        rc = -1;
    if (rc < 0) {
        action_reply_free(out);
        one_printable_line(err->msg);
    }
    return rc;
}

void action_reply_free(action_reply *r)
{
    json_decref(r->actions);
    json_decref(r->sent);
    free(r->call_id);
    r->actions = r->sent = NULL;
    r->call_id = NULL;
}

/* The frame (or the zoomed region) as the model sees it: a PNG, base64. */
static char *answer_png(const action_reply *r, const uint8_t *pixels, em_err *err)
{
    const cu_geometry *g = &r->geo;
    int x = 0, y = 0, w = g->screen_w, h = g->screen_h, dw = g->display_w, dh = g->display_h;
    if (r->answer == CU_ANSWER_ZOOM) { /* the region, as large as fits the display with its shape kept */
        x = r->zoom[0], y = r->zoom[1], w = r->zoom[2] - x, h = r->zoom[3] - y;
        if ((long)w * g->display_h > (long)h * g->display_w)
            dh = (int)((long)h * g->display_w / w), dw = g->display_w;
        else
            dw = (int)((long)w * g->display_h / h), dh = g->display_h;
        dw = dw < 1 ? 1 : dw, dh = dh < 1 ? 1 : dh;
    }
    _cleanup_free_ uint8_t *scaled = NULL;
    const uint8_t *src = pixels;
    size_t stride = (size_t)g->screen_w * 4;
    if (x || y || w != dw || h != dh) {
        if (frame_scale(pixels, stride, x, y, w, h, dw, dh, &scaled, err) < 0)
            return NULL;
        src = scaled, stride = (size_t)dw * 4;
    }
    png_buf png = {0};
    if (png_encode_rgbx(src, dw, dh, stride, 1, &png, err) < 0)
        return NULL;
    char *b64 = base64_encode(png.data, png.len);
    png_buf_free(&png);
    return b64;
}

int action_reply_answer(const action_reply *r, const uint8_t *pixels, int pointer_x, int pointer_y, json_t **answer,
                        em_err *err)
{
    *answer = NULL;
    if (r->space != SPACE_ANTHROPIC && r->space != SPACE_OPENAI)
        return 0;
    json_t *content;
    if (r->answer == CU_ANSWER_CURSOR) {
        int dx, dy;
        cu_point_to_display(&r->geo, pointer_x, pointer_y, &dx, &dy);
        char text[64];
        snprintf(text, sizeof text, "X=%d,Y=%d", dx, dy);
        content = json_pack("[{s:s, s:s}]", "type", "text", "text", text); /* only Anthropic's tool asks */
    } else {
        _cleanup_free_ char *b64 = answer_png(r, pixels, err);
        if (!b64)
            return -1;
        if (r->space == SPACE_OPENAI) {
            _cleanup_free_ char *url = xasprintf("data:image/png;base64,%s", b64);
            *answer = json_pack("{s:s, s:{s:s, s:s}}", "type", "computer_call_output", "output", "type",
                                "computer_screenshot", "image_url", url);
            if (r->call_id)
                json_object_set_new(*answer, "call_id", json_string(r->call_id));
            return 0;
        }
        content = json_pack("[{s:s, s:{s:s, s:s, s:s}}]", "type", "image", "source", "type", "base64", "media_type",
                            "image/png", "data", b64);
    }
    *answer = json_pack("{s:s, s:o}", "type", "tool_result", "content", content);
    if (r->call_id)
        json_object_set_new(*answer, "tool_use_id", json_string(r->call_id));
    return 0;
}

json_t *action_reply_refusal(json_t *reply, const char *message)
{
    json_t *v = json_object_get(reply, "anthropic");
    if (!v)
        return NULL;
    json_t *answer = json_pack("{s:s, s:b, s:[{s:s, s:s}]}", "type", "tool_result", "is_error", 1, "content", "type",
                               "text", "text", message);
    if (anthropic_tool_use_id(v))
        json_object_set_new(answer, "tool_use_id", json_string(anthropic_tool_use_id(v)));
    return answer;
}
