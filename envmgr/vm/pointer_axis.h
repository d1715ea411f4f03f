/* Where to send the pointer over VNC so that the guest's pointer lands on a given pixel.
 * QEMU hands a VNC position to its absolute tablet as floor(pos * 32767 / size), and the guest's
 * libinput scales that back as floor(abs * size / 32768): both round down, so a position sent as is
 * lands one pixel up and left of it (MOVE_TO 325,125 put the pointer on 324,124). */
#ifndef ENVMGR_VM_POINTER_AXIS_H
#define ENVMGR_VM_POINTER_AXIS_H

/* The pixel the guest's pointer reaches when the VNC position is wire (0 <= wire < size). */
int pointer_axis_landing(int wire, int size);
/* The VNC position in [0, size) whose landing is pos, or the nearest below it: the last pixel of an
 * axis is out of reach (it lands on size - 2). pos is clamped to [0, size). */
int pointer_axis_wire(int pos, int size);

#endif
