#!/usr/bin/python3
"""A small GTK 3 window for the accessibility dumper's host test: a labelled
button, an entry holding known text, a check box and a 3x2 list.  Prints
"ready" once mapped; runs until killed (or --seconds)."""
import sys

import gi
gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


def main():
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 120
    w = Gtk.Window(title="envmgr a11y test")
    w.set_default_size(400, 300)
    w.move(50, 60)
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=4)
    w.add(box)
    box.pack_start(Gtk.Button(label="Press me"), False, False, 0)
    e = Gtk.Entry()
    e.set_text("hello <a11y> & \"world\"")
    box.pack_start(e, False, False, 0)
    box.pack_start(Gtk.CheckButton(label="Check"), False, False, 0)
    store = Gtk.ListStore(str, str)
    for row in (("a1", "b1"), ("a2", "b2"), ("a3", "b3")):
        store.append(row)
    tv = Gtk.TreeView(model=store)
    for i, title in enumerate(("Col A", "Col B")):
        tv.append_column(Gtk.TreeViewColumn(title, Gtk.CellRendererText(), text=i))
    box.pack_start(tv, True, True, 0)
    w.connect("destroy", Gtk.main_quit)
    w.connect("map-event", lambda *a: print("ready", flush=True))
    w.show_all()
    GLib.timeout_add(int(seconds * 1000), Gtk.main_quit)
    Gtk.main()


main()
