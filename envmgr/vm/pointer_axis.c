#include "envmgr/vm/pointer_axis.h"

#include <stdint.h>

#define TABLET_MAX 32767 /* QEMU's INPUT_EVENT_ABS_MAX: the tablet's axis is [0, 32767] */

int pointer_axis_landing(int wire, int size)
{
    if (size <= 0)
        return 0;
    int64_t abs = (int64_t)wire * TABLET_MAX / size;
    return (int)(abs * size / (TABLET_MAX + 1));
}

int pointer_axis_wire(int pos, int size)
{
    if (size <= 1 || pos <= 0)
        return 0;
    if (pos >= size)
        pos = size - 1;
    /* The landing never exceeds the wire position and falls short by at most one pixel (for the
     * screen sizes a guest has, far below 32767), so pos or pos + 1 is the answer. */
    int wire = pos;
    while (wire < size - 1 && pointer_axis_landing(wire, size) < pos)
        wire++;
    return wire;
}
