/* OSWorld's metric names: those its evaluator defines and those its task files use. Names only
 * (facts about OSWorld, not its code): whether envmgr has each is asked of metric_known() when
 * `envmgr task pieces` prints the table docs/osworld.md is generated from. */
#include "evaluator/osworld.h"

#include <strings.h>

#include "envmgr/base/util.h"

static const char *const metric_names[] = {
    "check_accessibility_tree", "check_auto_saving_time", "check_brightness_decrease_and_structure_sim",
    "check_config_status", "check_contrast_increase_and_structure_sim", "check_csv", "check_direct_json_object",
    "check_enabled_experiments", "check_file_exists", "check_file_exists_and_structure_sim", "check_font_size",
    "check_global_key_play_pause", "check_gnome_favorite_apps", "check_green_background", "check_highlighted_words",
    "check_history_deleted", "check_html_background_image", "check_image_file_size", "check_image_mirror",
    "check_image_size", "check_image_stretch_and_center", "check_include_exclude", "check_italic_font_size_14",
    "check_json", "check_json_keybindings", "check_json_settings", "check_left_panel", "check_libre_locale",
    "check_line_number", "check_list", "check_moved_jpgs", "check_mp3_meta", "check_no_duplicates",
    "check_one_instance_when_started_from_file", "check_page_number_colors", "check_palette_and_structure_sim",
    "check_pdf_pages", "check_play_and_exit", "check_presenter_console_disable", "check_python_file_by_gold_file",
    "check_python_file_by_test_suite", "check_qt_bgcone", "check_qt_max_volume", "check_qt_minimal_view",
    "check_qt_slider_colours", "check_saturation_increase_and_structure_sim", "check_sharper",
    "check_slide_numbers_color", "check_slide_orientation_Portrait", "check_strikethrough", "check_structure_sim",
    "check_structure_sim_resized", "check_structure_sim_with_threshold", "check_tabstops", "check_text_enlarged",
    "check_textbox_on_leftside", "check_thunderbird_filter", "check_thunderbird_folder", "check_thunderbird_prefs",
    "check_transition", "check_triangle_position", "compare_answer", "compare_archive", "compare_audios",
    "compare_conference_city_in_order", "compare_config", "compare_contains_image", "compare_csv",
    "compare_docx_files", "compare_docx_files_and_ignore_new_lines", "compare_docx_images", "compare_docx_lines",
    "compare_docx_tables", "compare_epub", "compare_font_names", "compare_highlighted_text", "compare_htmls",
    "compare_image_list", "compare_image_text", "compare_images", "compare_init_lines", "compare_insert_equation",
    "compare_line_spacing", "compare_pdf_images", "compare_pdfs", "compare_pptx_files", "compare_python_pure_text",
    "compare_references", "compare_result_files", "compare_subscript_contains", "compare_table",
    "compare_terminal_and_txt", "compare_text_file", "compare_time_in_speedtest_results",
    "compare_triangle_positions", "compare_unique_train_records", "compare_videos", "compare_zip_files",
    "contains_page_break", "diff_text_file", "evaluate_alignment", "evaluate_colored_words_in_tables",
    "evaluate_conversion", "evaluate_presentation_fill_to_rgb_distance", "evaluate_spacing",
    "evaluate_strike_through_last_paragraph", "exact_match", "file_contains", "find_default_font", "fuzzy_match",
    "fuzzy_place_math", "has_page_numbers_in_footers", "infeasible", "is_added_to_steam_cart", "is_cookie_deleted",
    "is_expected_active_tab", "is_expected_active_tab_approximate", "is_expected_bookmarks",
    "is_expected_installed_extensions", "is_expected_search_query", "is_expected_tabs",
    "is_expected_url_pattern_match", "is_extension_installed", "is_first_line_centered",
    "is_gold_text_included_in_pdf", "is_in_list", "is_in_vm_clickboard", "is_included_all_json_objects",
    "is_shortcut_on_desktop", "is_utc_0", "is_vlc_fullscreen", "is_vlc_playing", "is_vlc_recordings_folder",
    "literal_match", "match_in_list", "run_sqlite3",
};

const char *const *osworld_metric_names(size_t *n)
{
    *n = ARRAY_LEN(metric_names);
    return metric_names;
}

/* related_apps as OSWorld-Verified's task files spell them (its own spellings vary: "vs_code" and
 * "vscode", "libreoffice calc" and "libreoffice_calc", "Writer"), and the package that brings each. */
static const struct {
    const char *app, *package;
} app_packages[] = {
    {"chrome", "chromium"},
    {"browser", "chromium"},
    {"libreoffice_calc", "libreoffice-calc"},
    {"libreoffice calc", "libreoffice-calc"},
    {"calc", "libreoffice-calc"},
    {"libreoffice_writer", "libreoffice-writer"},
    {"writer", "libreoffice-writer"},
    {"libreoffice_impress", "libreoffice-impress"},
    {"libreoffice", "libreoffice-core"},
    {"gimp", "gimp"},
    {"vlc", "vlc"},
    {"ubuntu_media_player", "vlc"},
    {"thunderbird", "thunderbird"},
    {"vscode", "code"},
    {"vs_code", "code"},
    {"picard", "picard"},
};

const char *osworld_app_package(const char *app)
{
    for (size_t i = 0; i < ARRAY_LEN(app_packages); i++)
        if (!strcasecmp(app, app_packages[i].app))
            return app_packages[i].package;
    return NULL;
}
