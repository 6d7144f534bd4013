import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * What a JDBC application (and tools built on JDBC) does against port 9071, run by jdbc.test.ts with the real
 * PostgreSQL JDBC driver: args are the JDBC URL, user and password. Prints one "name: value" line per check.
 */
public class JdbcProbe {
  public static void main(String[] args) throws Exception {
    try (Connection c = DriverManager.getConnection(args[0], args[1], args[2])) {
      // prepareThreshold=1 in the URL: server-side named statements from the first execution on.
      try (PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM sys_invocation WHERE status = ?")) {
        List<String> counts = new ArrayList<>();
        for (String status : new String[] {"completed", "running", "x' OR '1'='1"}) {
          ps.setString(1, status);
          try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            counts.add(status.length() > 10 ? "injected=" + rs.getLong(1) : status + "=" + rs.getLong(1));
          }
        }
        System.out.println("counts: " + String.join(",", counts));
      }

      // A fetch size in a transaction: a portal read a few rows at a time.
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.setFetchSize(2);
        List<String> rows = new ArrayList<>();
        try (ResultSet rs = st.executeQuery("SELECT g FROM generate_series(1, 5) g")) {
          while (rs.next()) rows.add(Integer.toString(rs.getInt(1)));
        }
        System.out.println("fetched: " + String.join(",", rows));
      }
      c.commit();
      c.setAutoCommit(true);

      DatabaseMetaData meta = c.getMetaData();
      List<String> views = new ArrayList<>();
      try (ResultSet rs = meta.getTables(null, "ratchet_sql", "sys_journal", new String[] {"VIEW"})) {
        while (rs.next()) views.add(rs.getString("TABLE_NAME"));
      }
      System.out.println("views: " + String.join(",", views));

      try (Statement st = c.createStatement()) {
        st.executeUpdate("DELETE FROM state");
        System.out.println("write: allowed");
      } catch (SQLException e) {
        System.out.println("write: " + e.getSQLState());
      }

      // Statement.cancel() sends a CancelRequest on a new connection, to 9071 like the session itself. It is sent
      // once a second session (of the same role, which sees its own statements) shows the statement running.
      try (Statement st = c.createStatement();
          Connection watcher = DriverManager.getConnection(args[0], args[1], args[2])) {
        Thread canceller =
            new Thread(
                () -> {
                  try (PreparedStatement running =
                      watcher.prepareStatement(
                          "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = ?")) {
                    running.setString(1, "SELECT pg_sleep(30)");
                    for (; ; ) {
                      try (ResultSet rs = running.executeQuery()) {
                        rs.next();
                        if (rs.getLong(1) > 0) break;
                      }
                      Thread.sleep(20);
                    }
                    st.cancel();
                  } catch (Exception e) {
                    System.out.println("cancel failed: " + e);
                  }
                });
        canceller.start();
        try {
          st.executeQuery("SELECT pg_sleep(30)");
          System.out.println("cancel: not cancelled");
        } catch (SQLException e) {
          System.out.println("cancel: " + e.getSQLState());
        }
        canceller.join();
      }

      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT current_user")) {
        rs.next();
        System.out.println("user: " + rs.getString(1));
      }
    }
  }
}
