#!/bin/sh
# Entrypoint of the redis stand-in (see redis.Containerfile), after the
# official image's docker-entrypoint.sh.
set -e

# `--option value` or `something.conf` as the command: run redis-server with it
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi

# started as root: own /data, then come back as the redis user
if [ "$1" = 'redis-server' ] && [ "$(id -u)" = '0' ]; then
	find . \! -user redis -exec chown redis '{}' +
	HOME=/var/lib/redis exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi

if [ "$1" = 'redis-server' ]; then
	# The official image builds redis with protected mode off by default;
	# Debian's keeps it on, which refuses every client from outside the
	# container when no password is set.  Turn it off the same way, unless the
	# config file given sets it; options given after this one still win.
	shift
	conf=
	if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
		conf="$1"
		shift
	fi
	if [ -n "$conf" ] && [ "$conf" != '-' ] && grep -qsE '^[[:space:]]*protected-mode[[:space:]]' "$conf"; then
		set -- redis-server "$conf" "$@"
	elif [ -n "$conf" ]; then
		set -- redis-server "$conf" --protected-mode no "$@"
	else
		set -- redis-server --protected-mode no "$@"
	fi

	# like the official image: files it creates are private unless a umask was set
	if [ "$(umask)" = '0022' ]; then
		umask 0077
	fi
fi

exec "$@"
