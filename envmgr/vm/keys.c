#include "envmgr/vm/keys.h"

#include <string.h>
#include <strings.h>

/* The unshifted and shifted character of every US-layout key that types one. */
static const struct {
    char plain, shifted;
    uint16_t scancode;
} char_keys[] = {
    {'1', '!', 0x02}, {'2', '@', 0x03}, {'3', '#', 0x04}, {'4', '$', 0x05}, {'5', '%', 0x06}, {'6', '^', 0x07},
    {'7', '&', 0x08}, {'8', '*', 0x09}, {'9', '(', 0x0a}, {'0', ')', 0x0b}, {'-', '_', 0x0c}, {'=', '+', 0x0d},
    {'q', 'Q', 0x10}, {'w', 'W', 0x11}, {'e', 'E', 0x12}, {'r', 'R', 0x13}, {'t', 'T', 0x14}, {'y', 'Y', 0x15},
    {'u', 'U', 0x16}, {'i', 'I', 0x17}, {'o', 'O', 0x18}, {'p', 'P', 0x19}, {'[', '{', 0x1a}, {']', '}', 0x1b},
    {'a', 'A', 0x1e}, {'s', 'S', 0x1f}, {'d', 'D', 0x20}, {'f', 'F', 0x21}, {'g', 'G', 0x22}, {'h', 'H', 0x23},
    {'j', 'J', 0x24}, {'k', 'K', 0x25}, {'l', 'L', 0x26}, {';', ':', 0x27}, {'\'', '"', 0x28}, {'`', '~', 0x29},
    {'\\', '|', 0x2b}, {'z', 'Z', 0x2c}, {'x', 'X', 0x2d}, {'c', 'C', 0x2e}, {'v', 'V', 0x2f}, {'b', 'B', 0x30},
    {'n', 'N', 0x31}, {'m', 'M', 0x32}, {',', '<', 0x33}, {'.', '>', 0x34}, {'/', '?', 0x35}, {' ', ' ', 0x39},
};

static const struct {
    const char *name;
    uint32_t keysym;
    uint16_t scancode;
} named_keys[] = {
    {"enter", 0xff0d, 0x1c},      {"return", 0xff0d, 0x1c},     {"\n", 0xff0d, 0x1c},
    {"\r", 0xff0d, 0x1c},         {"tab", 0xff09, 0x0f},        {"\t", 0xff09, 0x0f},
    {"esc", 0xff1b, 0x01},        {"escape", 0xff1b, 0x01},     {"backspace", 0xff08, 0x0e},
    {"delete", 0xffff, 0xd3},     {"del", 0xffff, 0xd3},        {"insert", 0xff63, 0xd2},
    {"space", 0x0020, 0x39},      {"up", 0xff52, 0xc8},         {"down", 0xff54, 0xd0},
    {"left", 0xff51, 0xcb},       {"right", 0xff53, 0xcd},      {"home", 0xff50, 0xc7},
    {"end", 0xff57, 0xcf},        {"pageup", 0xff55, 0xc9},     {"pgup", 0xff55, 0xc9},
    {"pagedown", 0xff56, 0xd1},   {"pgdn", 0xff56, 0xd1},       {"ctrl", 0xffe3, 0x1d},
    {"control", 0xffe3, 0x1d},    {"ctrlleft", 0xffe3, 0x1d},   {"ctrlright", 0xffe4, 0x9d},
    {"shift", 0xffe1, 0x2a},      {"shiftleft", 0xffe1, 0x2a},  {"shiftright", 0xffe2, 0x36},
    {"alt", 0xffe9, 0x38},        {"altleft", 0xffe9, 0x38},    {"altright", 0xffea, 0xb8},
    {"option", 0xffe9, 0x38},     {"win", 0xffeb, 0xdb},        {"winleft", 0xffeb, 0xdb},
    {"winright", 0xffec, 0xdc},   {"super", 0xffeb, 0xdb},      {"command", 0xffeb, 0xdb},
    {"meta", 0xffeb, 0xdb},       {"menu", 0xff67, 0xdd},       {"apps", 0xff67, 0xdd},
    {"capslock", 0xffe5, 0x3a},   {"numlock", 0xff7f, 0x45},    {"scrolllock", 0xff14, 0x46},
    {"pause", 0xff13, 0xc6},      {"printscreen", 0xff61, 0xb7}, {"print", 0xff61, 0xb7},
    {"prtsc", 0xff61, 0xb7},      {"prtscr", 0xff61, 0xb7},     {"prntscrn", 0xff61, 0xb7},
    {"f1", 0xffbe, 0x3b},         {"f2", 0xffbf, 0x3c},         {"f3", 0xffc0, 0x3d},
    {"f4", 0xffc1, 0x3e},         {"f5", 0xffc2, 0x3f},         {"f6", 0xffc3, 0x40},
    {"f7", 0xffc4, 0x41},         {"f8", 0xffc5, 0x42},         {"f9", 0xffc6, 0x43},
    {"f10", 0xffc7, 0x44},        {"f11", 0xffc8, 0x57},        {"f12", 0xffc9, 0x58},
    {"num0", 0xffb0, 0x52},       {"num1", 0xffb1, 0x4f},       {"num2", 0xffb2, 0x50},
    {"num3", 0xffb3, 0x51},       {"num4", 0xffb4, 0x4b},       {"num5", 0xffb5, 0x4c},
    {"num6", 0xffb6, 0x4d},       {"num7", 0xffb7, 0x47},       {"num8", 0xffb8, 0x48},
    {"num9", 0xffb9, 0x49},       {"multiply", 0xffaa, 0x37},   {"add", 0xffab, 0x4e},
    {"subtract", 0xffad, 0x4a},   {"decimal", 0xffae, 0x53},    {"divide", 0xffaf, 0xb5},
    {"browserback", 0x1008ff26, 0xea}, {"browserforward", 0x1008ff27, 0xe9},
};

int key_for_char(unsigned char c, key_code *out)
{
    if (c == '\n' || c == '\t')
        return key_lookup(c == '\n' ? "enter" : "tab", out);
    for (size_t i = 0; i < sizeof char_keys / sizeof *char_keys; i++) {
        if (char_keys[i].plain == (char)c || char_keys[i].shifted == (char)c) {
            out->keysym = c;
            out->scancode = char_keys[i].scancode;
            out->shift = char_keys[i].plain != (char)c;
            return 0;
        }
    }
    return -1;
}

int key_lookup(const char *name, key_code *out)
{
    if (!name || !name[0])
        return -1;
    for (size_t i = 0; i < sizeof named_keys / sizeof *named_keys; i++) {
        if (!strcasecmp(name, named_keys[i].name)) {
            out->keysym = named_keys[i].keysym;
            out->scancode = named_keys[i].scancode;
            out->shift = false;
            return 0;
        }
    }
    if (!name[1] && (unsigned char)name[0] >= 0x20 && (unsigned char)name[0] < 0x7f)
        return key_for_char((unsigned char)name[0], out);
    return -1;
}

bool key_is_modifier(uint32_t keysym)
{
    return keysym >= 0xffe1 && keysym <= 0xffee;
}
