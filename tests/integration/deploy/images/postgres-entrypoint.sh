#!/usr/bin/env bash
# Entrypoint of the postgres stand-in (see postgres.Containerfile), after the
# official image's docker-entrypoint.sh: on first start it initialises
# $PGDATA, creates POSTGRES_USER (superuser) with POSTGRES_PASSWORD and
# POSTGRES_DB, runs /docker-entrypoint-initdb.d/*, then execs postgres in the
# foreground as the postgres user.
set -Eeo pipefail

# file_env VAR [DEFAULT]: VAR from $VAR or from the file named by $VAR_FILE
file_env() {
	local var="$1" fileVar="${1}_FILE" def="${2:-}"
	if [ "${!var:-}" ] && [ "${!fileVar:-}" ]; then
		printf >&2 'error: both %s and %s are set (but are exclusive)\n' "$var" "$fileVar"
		exit 1
	fi
	local val="$def"
	if [ "${!var:-}" ]; then
		val="${!var}"
	elif [ "${!fileVar:-}" ]; then
		val="$(< "${!fileVar}")"
	fi
	export "$var"="$val"
	unset "$fileVar"
}

setup_env() {
	file_env POSTGRES_PASSWORD
	file_env POSTGRES_USER 'postgres'
	file_env POSTGRES_DB "$POSTGRES_USER"
	file_env POSTGRES_INITDB_ARGS
	: "${POSTGRES_HOST_AUTH_METHOD:=}"
	: "${PGDATA:=/var/lib/postgresql/data}"
	export PGDATA
	DATABASE_ALREADY_EXISTS=
	if [ -s "$PGDATA/PG_VERSION" ]; then
		DATABASE_ALREADY_EXISTS=true
	fi
}

create_db_directories() {
	local user
	user="$(id -u)"
	mkdir -p "$PGDATA"
	chmod 00700 "$PGDATA" || :
	mkdir -p /var/run/postgresql || :
	chmod 03775 /var/run/postgresql || :
	if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
		mkdir -p "$POSTGRES_INITDB_WALDIR"
		if [ "$user" = '0' ]; then
			find "$POSTGRES_INITDB_WALDIR" \! -user postgres -exec chown postgres '{}' +
		fi
		chmod 700 "$POSTGRES_INITDB_WALDIR"
	fi
	if [ "$user" = '0' ]; then
		find "$PGDATA" \! -user postgres -exec chown postgres '{}' +
		find /var/run/postgresql \! -user postgres -exec chown postgres '{}' +
	fi
}

verify_minimum_env() {
	if [ -z "$POSTGRES_PASSWORD" ] && [ 'trust' != "$POSTGRES_HOST_AUTH_METHOD" ]; then
		cat >&2 <<-'EOE'
			Error: Database is uninitialized and superuser password is not specified.
			       You must specify POSTGRES_PASSWORD to a non-empty value for the
			       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".

			       You may also use "POSTGRES_HOST_AUTH_METHOD=trust" to allow all
			       connections without a password. This is *not* recommended.
		EOE
		exit 1
	fi
}

init_database_dir() {
	if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
		set -- --waldir "$POSTGRES_INITDB_WALDIR" "$@"
	fi
	# the password goes over a pipe, never on a command line; initdb refuses a
	# truly empty file, hence the newline
	eval 'initdb --username="$POSTGRES_USER" --pwfile=<(printf "%s\n" "$POSTGRES_PASSWORD") '"$POSTGRES_INITDB_ARGS"' "$@"'
}

setup_hba_conf() {
	if [ "${1:-}" = 'postgres' ]; then
		shift
	fi
	local auth
	# the default method follows password_encryption (scram-sha-256)
	auth="$(postgres -C password_encryption "$@")"
	: "${POSTGRES_HOST_AUTH_METHOD:=$auth}"
	{
		printf '\n'
		if [ 'trust' = "$POSTGRES_HOST_AUTH_METHOD" ]; then
			printf '# warning trust is enabled for all connections\n'
		fi
		printf 'host all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD"
	} >> "$PGDATA/pg_hba.conf"
}

# psql on the unix socket, as POSTGRES_USER, into POSTGRES_DB
process_sql() {
	local query_runner=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
	if [ -n "$POSTGRES_DB" ]; then
		query_runner+=(--dbname "$POSTGRES_DB")
	fi
	PGHOST= PGHOSTADDR= "${query_runner[@]}" "$@"
}

setup_db() {
	local exists
	exists="$(POSTGRES_DB= process_sql --dbname postgres --set db="$POSTGRES_DB" --tuples-only <<-'EOSQL'
		SELECT 1 FROM pg_database WHERE datname = :'db' ;
	EOSQL
	)"
	if [ -z "$exists" ]; then
		POSTGRES_DB= process_sql --dbname postgres --set db="$POSTGRES_DB" <<-'EOSQL'
			CREATE DATABASE :"db" ;
		EOSQL
		printf '\n'
	fi
}

process_init_files() {
	local f
	for f; do
		case "$f" in
			*.sh)
				if [ -x "$f" ]; then
					printf '%s: running %s\n' "$0" "$f"
					"$f"
				else
					printf '%s: sourcing %s\n' "$0" "$f"
					# shellcheck disable=SC1090
					. "$f"
				fi
				;;
			*.sql)     printf '%s: running %s\n' "$0" "$f"; process_sql -f "$f"; printf '\n' ;;
			*.sql.gz)  printf '%s: running %s\n' "$0" "$f"; gunzip -c "$f" | process_sql; printf '\n' ;;
			*.sql.xz)  printf '%s: running %s\n' "$0" "$f"; xzcat "$f" | process_sql; printf '\n' ;;
			*.sql.zst) printf '%s: running %s\n' "$0" "$f"; zstd -dc "$f" | process_sql; printf '\n' ;;
			*)         printf '%s: ignoring %s\n' "$0" "$f" ;;
		esac
	done
}

# a server on the unix socket only, for the set-up steps
temp_server_start() {
	if [ "${1:-}" = 'postgres' ]; then
		shift
	fi
	set -- "$@" -c listen_addresses='' -p "${PGPORT:-5432}"
	PGUSER="${PGUSER:-$POSTGRES_USER}" \
		pg_ctl -D "$PGDATA" -o "$(printf '%q ' "$@")" -w start
}

temp_server_stop() {
	PGUSER="${PGUSER:-postgres}" pg_ctl -D "$PGDATA" -m fast -w stop
}

# --help, --version, -C ...: pass straight to postgres, no set-up
want_help() {
	local arg
	for arg; do
		case "$arg" in
			-'?' | --help | --describe-config | -V | --version) return 0 ;;
			-C | --config-*) return 0 ;;
		esac
	done
	return 1
}

main() {
	# `-c max_connections=200` as the whole command means `postgres -c ...`
	if [ "${1:0:1}" = '-' ]; then
		set -- postgres "$@"
	fi

	if [ "$1" = 'postgres' ] && ! want_help "$@"; then
		setup_env
		create_db_directories
		if [ "$(id -u)" = '0' ]; then
			# again, as the postgres user
			HOME=/var/lib/postgresql exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
		fi

		if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
			verify_minimum_env
			# for auth methods other than trust on the local socket (POSTGRES_INITDB_ARGS)
			export PGPASSWORD="${PGPASSWORD:-$POSTGRES_PASSWORD}"
			ls /docker-entrypoint-initdb.d/ > /dev/null
			init_database_dir
			setup_hba_conf "$@"
			temp_server_start "$@"
			setup_db
			process_init_files /docker-entrypoint-initdb.d/*
			temp_server_stop
			unset PGPASSWORD
			printf '\nPostgreSQL init process complete; ready for start up.\n\n'
		else
			printf '\nPostgreSQL Database directory appears to contain a database; Skipping initialization\n\n'
		fi
	fi

	exec "$@"
}

main "$@"
