#!/usr/bin/env python3
"""Apply xfconf default settings to the system-wide XML files of an image.

Usage: xfconf-set.py XMLDIR SETTINGS-FILE

XMLDIR is the image's etc/xdg/xfce4/xfconf/xfce-perchannel-xml.  Each
non-comment line of SETTINGS-FILE is

    CHANNEL  /PROPERTY/PATH  TYPE  VALUE...

TYPE is an xfconf type (string, bool, int, uint, double) or array:TYPE, whose
VALUE is a whitespace-separated list.  For string the rest of the line is the
value (it may contain blanks).

The packages ship default files (e.g. xfce4-keyboard-shortcuts.xml holds every
standard shortcut); editing them in place keeps everything not mentioned here,
where replacing the file would silently drop the packaged defaults.  A missing
channel file is created.  Users' own settings still override these defaults.
"""
import os
import sys
import xml.etree.ElementTree as ET

SCALARS = {"string", "bool", "int", "uint", "double"}


def child(parent, name):
    for el in parent.findall("property"):
        if el.get("name") == name:
            return el
    el = ET.SubElement(parent, "property", {"name": name, "type": "empty"})
    return el


def check_value(typ, value, where):
    try:
        if typ == "bool" and value not in ("true", "false"):
            raise ValueError
        if typ in ("int", "uint"):
            if int(value) < 0 and typ == "uint":
                raise ValueError
        if typ == "double":
            float(value)
    except ValueError:
        sys.exit(f"{where}: bad {typ} value {value!r}")


def set_property(root, path, typ, value, where):
    names = [n for n in path.split("/") if n]
    if not names:
        sys.exit(f"{where}: empty property path")
    node = root
    for name in names:
        node = child(node, name)
    if typ.startswith("array:"):
        elem_type = typ.split(":", 1)[1]
        if elem_type not in SCALARS:
            sys.exit(f"{where}: bad array element type {elem_type!r}")
        for old in node.findall("value"):
            node.remove(old)
        node.set("type", "array")
        node.attrib.pop("value", None)
        for v in value.split():
            check_value(elem_type, v, where)
            ET.SubElement(node, "value", {"type": elem_type, "value": v})
    elif typ in SCALARS:
        check_value(typ, value, where)
        node.set("type", typ)
        node.set("value", value)
    else:
        sys.exit(f"{where}: unknown type {typ!r}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    xmldir, settings = sys.argv[1], sys.argv[2]
    trees = {}
    with open(settings, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{settings}:{lineno}"
            parts = line.split(None, 3)
            if len(parts) != 4:
                sys.exit(f"{where}: expected CHANNEL PATH TYPE VALUE")
            channel, path, typ, value = parts
            if channel not in trees:
                fn = os.path.join(xmldir, channel + ".xml")
                if os.path.exists(fn):
                    tree = ET.parse(fn)
                else:
                    tree = ET.ElementTree(ET.Element("channel", {"name": channel, "version": "1.0"}))
                trees[channel] = (fn, tree)
            set_property(trees[channel][1].getroot(), path, typ, value, where)
    os.makedirs(xmldir, exist_ok=True)
    for fn, tree in trees.values():
        ET.indent(tree, space="  ")
        tmp = fn + ".tmp"
        tree.write(tmp, encoding="UTF-8", xml_declaration=True)
        with open(tmp, "a", encoding="utf-8") as f:
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, fn)


if __name__ == "__main__":
    main()
