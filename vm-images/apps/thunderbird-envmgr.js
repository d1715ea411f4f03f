// envmgr apps image: Thunderbird defaults (installed by build.sh into
// Thunderbird's defaults/pref directory; a user's prefs.js still wins).
// No account setup tab or provider dialog when no account exists.
pref("mail.provider.suppress_dialog_on_startup", true);
pref("mail.provider.enabled", false);
// No "make Thunderbird the default client" dialog.
pref("mail.shell.checkDefaultClient", false);
// No start page (it would load from the network) and no "what's new" tab.
pref("mailnews.start_page.enabled", false);
pref("mailnews.start_page.override_url", "");
pref("mail.ui.show.migration.on.upgrade", false);
pref("app.update.enabled", false);
pref("app.update.auto", false);
pref("extensions.update.enabled", false);
// No "know your rights" / data-reporting notification bars, no telemetry.
pref("mail.rights.override", true);
pref("datareporting.policy.dataSubmissionEnabled", false);
pref("datareporting.policy.dataSubmissionPolicyBypassNotification", true);
pref("datareporting.healthreport.uploadEnabled", false);
pref("toolkit.telemetry.enabled", false);
pref("toolkit.telemetry.reportingpolicy.firstRun", false);
// No donation appeal tab.
pref("app.donation.eoy.version.viewed", 999);
// Accessibility never forced off (the session turns AT-SPI on).
pref("accessibility.force_disabled", 0);
