/* The one tokenizer of `key=value` option lists (--disk, --net, --fs,
 * --vsock, --entropy, --balloon and every device's *_options_parse):
 * items separated by commas, empty items skipped (",,", a leading or a
 * trailing comma), each item cut at its first '=' into a key and a value.
 * No quoting and no escapes: a value holds neither ',' (it ends the item)
 * nor needs '=' escaped (only the first one cuts). Pure: a mutable copy
 * of the list is cut in place, as strtok_r does. */
#ifndef VMM_KVOPT_H
#define VMM_KVOPT_H

/* The next item of the list at *cur (the caller's mutable copy; *cur
 * moves past it): returns its key (NUL-terminated), with *val its value
 * (NUL-terminated, "" for "key=") or NULL for an item without '='; NULL
 * at the end of the list. */
char *kvopt_next(char **cur, char **val);

#endif
