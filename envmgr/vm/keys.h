/* Key names (OSWorld / pyautogui spelling) and characters to X keysyms and
 * XT scancodes for a US layout. The scancode is what QEMU's extended key
 * event delivers, so the guest sees the key the agent meant, whatever the
 * keymap guess on the QEMU side. */
#ifndef ENVMGR_KEYS_H
#define ENVMGR_KEYS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct key_code {
    uint32_t keysym;   /* X keysym */
    uint16_t scancode; /* XT set-1 scancode in QEMU's "qnum" form (0x80 | code for E0-prefixed keys) */
    bool shift;        /* the character needs Shift held on a US keyboard */
} key_code;

/* A key name as OSWorld agents write it: "ctrl", "enter", "f5", "a", "A", "/".
 * Case-insensitive for names; a single character is taken as that character. */
int key_lookup(const char *name, key_code *out);
/* A character of TYPING text: printable ASCII, '\n' and '\t'. */
int key_for_char(unsigned char c, key_code *out);
/* Modifiers are pressed first and released last in a HOTKEY. */
bool key_is_modifier(uint32_t keysym);

#endif
